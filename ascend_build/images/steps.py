"""The steps every image kind goes through, whatever it is: the committed Dockerfile
checked against the matrix, an untagged candidate built, its kind's test suite run on
it, and the tags set only after the tests passed. Runtime builds (build.py), builder and
wheel builds (sources.py) and every kind built on a tested runtime image stand on this
module; it knows none of them (a kind on a runtime declares its image: `OnRuntime`)."""
from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn

from .. import console, project
from .. import engine as eng
from ..engine import interrupts
from ..engine.network import Network, secret_files, tls_hint
from ..errors import BuildFailed, EngineError, TestsFailed, UserError
from ..locking.layerlock import LayerLock
from .kinds import NO_CONTENT_TAG, ImageKind, Tags, label, suites
from .render import Rendered


@dataclass(frozen=True)
class Built:
    """What a build left: the image tested and tagged (None: a dry run), its tags, log and
    content tag."""
    cell: Any
    image_id: str | None
    tags: Tags
    log: Path | None
    content_tag: str
    stop: UserError | None = None     # a dry run: where the real one would stop (the plan is shown all the same)


def current_dockerfile(rendered: Rendered) -> Path:
    """The committed Dockerfile, refused when it is not what the matrix renders to."""
    path = project.root() / rendered.path
    if not path.exists() or path.read_text() != rendered.text:
        raise UserError(f"{rendered.path} is missing or stale against the matrix in {project.root()}; run "
                        f"`invoke render` first")
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


def show_dry(engine: eng.Engine, req: eng.BuildRequest, tags: Tags, kind) -> None:
    cmd, env = engine.build_command(req)
    console.show(eng.show(cmd, env))
    if f":{NO_CONTENT_TAG}-" in tags.content:
        console.show(f"# content tag: unknown ({NO_CONTENT_TAG} stands for it): the plan has stand-ins (<...> "
                     f"above) for what only the real run has; its tag is computed from those files and locks")
    console.show(f"# then: pytest {' '.join(f'tests/{s}' for s in suites(kind))} --image <built id>; on success:")
    for tag in tags:
        console.show(eng.show(engine.tag_argv("<built id>", tag)))


def check_base(engine: eng.Engine, base: str, platform: str, advice: str,
               make: Callable[[str, str], None] | None = None) -> None:
    """The base image is here, or the engine can pull it (or `make` makes it), before
    anything is built: an air-gapped site otherwise learns it from a DNS error deep in
    the build. `advice` says what to do when none of that works."""
    if engine.exists(base):
        return
    if make is not None:
        make(base, platform)
        return
    console.say(f"base image {base} is not here; pulling it")
    said = engine.pull(base, platform)
    if said is not None:
        raise EngineError(f"base image {base} is not here and cannot be pulled ({said}).\n{advice}")


def build_test_tag(engine: eng.Engine, req: eng.BuildRequest, what: str, tags: Tags, log: Path,
                   test: Callable[[str], int], finish: Callable[[str], str] | None = None,
                   keep_failed: bool = False) -> str:
    """Build an untagged candidate, test it, and tag it only when the tests pass (exit 0;
    any other end is a failure, and a Ctrl-C one an interrupt). `finish` turns the
    candidate into the image that is tested and tagged (a runtime image gets its manifest
    and SBOM there). What this leaves behind is only the tagged image: a failed one is
    removed (`keep_failed` keeps it to debug), and an image the tags moved away from is
    removed once nothing names it."""
    assert req.iidfile is not None
    req.iidfile.unlink(missing_ok=True)
    console.say(f"building {what}; log: {log}")
    code = engine.build(req, log)
    if code != 0:
        tail = log.read_text(errors="replace")[-20000:] if log.is_file() else ""
        raise BuildFailed(f"build of {what} failed (exit {code}); nothing was tagged. Log: {log}.{tls_hint(tail)}")
    candidate = req.iidfile.read_text().strip()
    try:
        image = finish(candidate) if finish else candidate
    except BaseException:
        with interrupts.deferred():
            remove_untagged(engine, [candidate])
        raise
    # The candidate before `finish` is nobody's: the finished image carries its layers.
    leftovers = [candidate] if image != candidate else []
    before: set[str] | None = None      # the containers of the image before its suite: not the suite's
    try:
        before = set(engine.containers_of(image))
        verdict = test(image)
    except BaseException:
        # Ctrl-C (or a crash) during the suite: what was built is nobody's; no tag was set.
        with interrupts.deferred():
            remove_untagged(engine, [image] + leftovers, before)
        raise
    if verdict != 0:
        _failed(engine, image, what, verdict, leftovers, before, keep_failed)
    interrupts.check()                  # one that came between the steps
    tag_all(engine, image, tags)
    with interrupts.deferred():
        remove_untagged(engine, leftovers, before)
    console.say(f"tested and tagged {image}:\n  " + "\n  ".join(tags))
    return image


def _failed(engine: eng.Engine, image: str, what: str, verdict: int, leftovers: list[str],
            before: set[str] | None, keep_failed: bool) -> NoReturn:
    """The suite did not pass: nothing is tagged, and what was built goes (unless kept)."""
    failed = f"image tests failed for {image} ({what}; {suite_ended(verdict)}); nothing was tagged"
    if keep_failed:
        raise TestsFailed(f"{failed}. It is kept (--keep-failed): rerun them with `invoke test --image {image}`, "
                          f"remove it with `{engine.client} rmi {image}`")
    with interrupts.deferred():
        left = remove_untagged(engine, [image] + leftovers, before)
    if image in left:
        raise TestsFailed(f"{failed}; the image is left untagged: a container uses it (the warning above names it)")
    raise TestsFailed(f"{failed} and the image was removed (build again with --keep-failed to keep it for debugging)")


# pytest's exit codes (pytest.ExitCode), said in the gate's message; only 0 passes. 2 is
# a collection error as well as pytest's own Ctrl-C: a Ctrl-C this task saw too ends as
# an interrupt in the runner (exit 130), not here.
PYTEST_EXITS = {1: "tests failed", 2: "interrupted, or an error while collecting", 3: "pytest's internal error",
                4: "pytest's usage error", 5: "no tests were collected"}


def suite_ended(code: int) -> str:
    """How a suite's run ended, in words: its exit code and what pytest means by it, or
    the signal that killed it."""
    if code < 0:
        return f"the suite was killed by {_signal_name(-code)}"
    meaning = PYTEST_EXITS.get(code) or (f"128 + {_signal_name(code - 128)}" if code > 128 else "")
    return f"the suite ended with exit {code}" + (f": {meaning}" if meaning else "")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def reuse(engine: eng.Engine, tags: Tags, content: str, what: str, retest: bool,
          test: Callable[[str], int]) -> str | None:
    """The image tagged with this content tag (tags.content), if it is here: it passed its tests
    when it was tagged, from exactly these inputs. Every tag of the image is set on it
    again; with `retest` its suite runs first, and a failure takes its tags away."""
    if content == NO_CONTENT_TAG:       # only a dry run has stand-ins: a real one never reuses or tags by one
        raise UserError(f"{what}: its content tag is unknown (an input is a stand-in); nothing is reused or tagged")
    found = engine.image_id(tags.content)
    if found is None or label_of(engine, found, "content-tag") != content:
        return None
    if retest:
        console.say(f"{tags.content} is here; --retest: running its suite again")
        verdict = test(found)
        if verdict != 0:
            with interrupts.deferred():
                # The engine keeps the last tag of an image a container uses (`rmi` without force).
                kept = [] if engine.remove(*tags) else [t for t in tags if engine.exists(t)]
            said = f"{tags.content} ({what}) failed its suite again ({suite_ended(verdict)})"
            if kept:
                users = ", ".join(engine.containers_of(found)) or "none listed"
                raise TestsFailed(f"{said}; its tags were removed but {', '.join(kept)}, which the engine keeps while "
                                  f"a container uses the image ({users})")
            raise TestsFailed(f"{said}; its tags were removed")
    tag_all(engine, found, tags)
    console.say(f"{tags.content} is here, tested when it was tagged from these same inputs: reused ({found[:19]}; --retest "
                f"runs its suite again, --no-cache builds it again):\n  " + "\n  ".join(tags))
    return found


def label_of(engine: eng.Engine, image: str, key: str) -> str:
    return (engine.labels(image) or {}).get(label(key), "")


def tag_all(engine: eng.Engine, image: str, tags: Tags) -> None:
    """All tags or none (an interrupt waits for the last); the images they named before
    are removed when no tag names them any more (a rebuild leaves nothing dangling)."""
    with interrupts.deferred():
        named = {t: engine.image_id(t) for t in tags}
        before = {i for i in named.values() if i}
        new = engine.image_id(image)
        for tag in tags:
            if not engine.tag(image, tag):
                raise EngineError(f"could not tag {image} as {tag}")
        interrupts.record(f"tagged {tags.readable}")
        for tag, old in named.items():
            if old and new and old != new:      # a rebuild (another epoch, another engine) moved it: say so
                console.say(f"{tag} moved from {old[:19]} to {new[:19]}")
        remove_untagged(engine, sorted(before - {new}))


def remove_untagged(engine: eng.Engine, images: list[str], before_suite: set[str] | None = None) -> list[str]:
    """Remove these images where no tag names them; returns those it could not. The engine
    refuses to remove an image a container uses, running or stopped. A container that was
    not there before the image's suite ran (`before_suite`) is the suite's own, left by a
    suite killed before its teardown: it goes, then the image. Any other is someone's (a
    job on an image the tags moved away from): the image stays, and a warning names both."""
    left = []
    for image in images:
        if engine.tag_count(image) != 0:      # a tag names it, or it is gone
            continue
        if engine.remove(image):
            continue
        users = engine.containers_of(image)
        suites = [c for c in users if before_suite is not None and c not in before_suite]
        if suites and engine.remove_containers(*suites) and engine.remove(image):
            console.say(f"removed {image} after the containers its suite left: {', '.join(c[:12] for c in suites)}")
            continue
        if engine.exists(image):
            left.append(image)
            still = engine.containers_of(image)
            console.warn(f"left {image} untagged: containers use it ({', '.join(still)}); once they are gone, "
                         f"`{engine.client} rmi {image}` removes it" if still else
                         f"left {image} untagged: the engine refused to remove it (`{engine.client} rmi {image}` "
                         f"says why)")
    return left


def run_image_tests(image: str, matrix_path: Path, engine: eng.Engine, extra: list[str] | None = None,
                    suite: str | None = None, kind: ImageKind[Any] | None = None) -> int:
    """The test suites of the image's kind (its module passes it; `invoke test --image` reads
    the label: catalog.kind_of), its own first; one that fails ends the run (the inherited
    suites would only confirm a verdict already given)."""
    if not suite and kind is None:
        raise ValueError("run_image_tests: a suite or the image's kind")
    chosen = [suite] if suite else suites(kind) if kind else []
    # A suite of its own, even when a test suite's worker asks for it (xdist's and the
    # suite's own variables would make it think it is one of that run's workers).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "ASCEND_BUILD_TEST_"))}
    for name in chosen:
        cmd = [sys.executable, "-m", "pytest", str(project.root() / "tests" / name), "-p", "no:cacheprovider",
               "--image", image, "--matrix", str(matrix_path), "--engine-client", engine.client,
               "--engine", engine.kind, "-v", *(extra or [])]
        console.say("$ " + eng.show(cmd))
        # Through the engine runner: Ctrl-C reaches pytest, which removes its containers.
        code = eng.run(cmd, cwd=project.root(), env=env, inherit=False)
        if code != 0:       # any code but 0 fails: 5 (nothing collected) proves nothing; a signal's is < 0
            return code
    return 0


SCRIPTS = Path(__file__).parent       # the scripts a build's steps run (wheel_arch.py, ...), staged by name


@dataclass(frozen=True)
class OnRuntime:
    """One image of a kind built FROM a cell's tested runtime image (catalog.ON_RUNTIME), as
    its module declares it (catalog.OnRuntimeModule's `image`), every input decided: the
    one build path (batch.build_on_runtime, then `build_on` below) makes its content tag,
    tags, labels and work folder from it, stages its context, and builds, tests and tags it
    the same way for every such kind."""
    kind: ImageKind[Any]                # its labels, its tags, its suites (then those of the kinds it extends)
    suffix: str                         # what its name adds to the runtime's: <runtime name>-<suffix>-<arch>
    rendered: Rendered                  # its Dockerfile (the committed one, refused when stale)
    lock: LayerLock                     # its packages, locked with the runtime's held
    own: str                            # its lock's name among the image's requirements (layer-<name>, ...)
    build_args: dict[str, str]          # beside RUNTIME_IMAGE, the tested runtime image by its content tag
    hashes: dict[str, str]              # the content tag's inputs beside the Dockerfile and build args
    labels: Callable[[str, str], dict[str, str]]    # its labels, from its content tag and the runtime it is built on
    what: str                           # how its messages name it ("user layer nlp")
    staged: str                         # what a dry run says goes into its context
    context: dict[str, str | Path] = field(default_factory=dict)    # its context: a file's text, or the file copied
    folders: tuple[str, ...] = ()       # folders in its context even when empty (a mount's source)
    host_args: dict[str, str] = field(default_factory=dict)     # how this machine builds it: not content
    before: Callable[[eng.Engine], None] | None = None     # checked when it is built (not when reused)


@dataclass(frozen=True)
class Plan:
    """An image on a runtime, every name decided: what `build_on` builds, tests and tags."""
    image: OnRuntime
    cell: Any
    dockerfile: Path
    build_args: dict[str, str]
    content: str
    tags: Tags
    labels: dict[str, str]
    work: Path
    what: str


def stage(ctx: Path, image: OnRuntime) -> None:
    """Its context as declared: each file written from its text or copied, each folder made."""
    for folder in image.folders:
        (ctx / folder).mkdir(parents=True, exist_ok=True)
    for name, source in image.context.items():
        target = ctx / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, Path):
            shutil.copy2(source, target)
        else:
            target.write_text(source)


def build_on(plan: Plan, site: Any, engine: eng.Engine, test: Callable[[str], int],
             finish: Callable[[str], str]) -> Built:
    """Reused when its content is here and tested; else its context staged, the candidate
    built, its suites run, then the project's files added (`finish`) and the tags set."""
    image = plan.image
    if not site.dry and not site.no_cache:
        reused = reuse(engine, plan.tags, plan.content, plan.what, site.retest, test)
        if reused:
            return Built(plan.cell, reused, plan.tags, None, plan.content)
    ctx = plan.work / "context"
    with secrets(site.net, fresh=site.no_cache) as secret:
        breq = eng.BuildRequest(dockerfile=plan.dockerfile, context=ctx, platform=plan.cell.platform,
                                build_args={**plan.build_args, **image.host_args}, secrets=secret, labels=plan.labels,
                                iidfile=plan.work / "image-id", no_cache=site.no_cache, network=site.net.mode)
        if site.dry:
            console.show(f"# stage {image.staged} -> {ctx}")
            show_dry(engine, breq, plan.tags, image.kind)
            return Built(plan.cell, None, plan.tags, None, plan.content)
        plan.work.mkdir(parents=True, exist_ok=True)
        try:
            if ctx.exists():
                shutil.rmtree(ctx)
            if image.before is not None:
                image.before(engine)
            stage(ctx, image)
            image_id = build_test_tag(engine, breq, plan.what, plan.tags, plan.work / "build.log", test, finish,
                                      keep_failed=site.keep_failed)
        finally:
            with interrupts.deferred():
                shutil.rmtree(ctx, ignore_errors=True)
    return Built(plan.cell, image_id, plan.tags, plan.work / "build.log", plan.content)
