"""Source trees for torch_npu and apex builds, the way a site can have them offline: a
local checkout with its submodules, a git bundle per repository, or a source tarball per
repository (`git archive` records its commit), or online a clone of the release tag with
the submodules at their pinned commits. Each is checked against the commit it must be,
before anything compiles."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import console
from ..engine import credentials, interrupts
from ..errors import UserError
from ..upstream.pytorch_git import VERSION_LINE

IGNORED = {".git", "build", "dist", "__pycache__", ".eggs"}
ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.xz")


@dataclass(frozen=True)
class Expected:
    """What a tree must be: the release's commit and its submodules' (None: not known)."""
    what: str                                   # "torch_npu 2.1.0.post8 (tag v6.0.rc3-pytorch2.1.0)"
    commit: str | None = None
    version: str | None = None                  # what its setup.py / version.txt must say
    submodules: dict[str, str] = field(default_factory=dict)      # path -> commit
    urls: dict[str, str] = field(default_factory=dict)            # path -> where it comes from


@dataclass(frozen=True)
class Checkout:
    path: Path
    revision: str       # commit plus every submodule's, or a content hash of a plain tree
    origin: str


def _git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`env`: added to this process's environment (credentials: never in `args`)."""
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **env} if env else None)


def parse_source(text: str) -> tuple[str, str | None]:
    """`PATH`, or `URL@REF` / `URL#REF` (the ref after the last slash)."""
    if Path(text).exists():
        return str(Path(text).resolve()), None
    head, sep, tail = text.rpartition("/")
    for mark in ("#", "@"):
        if mark in tail:
            name, ref = tail.split(mark, 1)
            return f"{head}{sep}{name}", ref
    return text, None


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in IGNORED or part.endswith(".egg-info") for part in rel.parts) or not path.is_file():
            continue
        digest.update(str(rel).encode() + b"\0" + oct(path.stat().st_mode & 0o777).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return "tree-" + digest.hexdigest()[:24]


def head_commit(path: Path) -> str | None:
    """The commit checked out at `path`, when it is the top of a git checkout (a submodule's
    folder has a .git file)."""
    if not (path / ".git").exists():
        return None
    out = _git("rev-parse", "HEAD", cwd=path)
    return out.stdout.strip() if out.returncode == 0 else None


def tar_commit(archive: Path) -> str | None:
    """The commit `git archive` wrote into a tarball's header, if any."""
    try:
        with tarfile.open(archive) as tar:
            comment = tar.pax_headers.get("comment", "")
    except (tarfile.TarError, OSError) as e:
        raise UserError(f"{archive}: not a readable tarball ({e})") from None
    comment = comment.strip()
    return comment if len(comment) == 40 and all(c in "0123456789abcdef" for c in comment) else None


def bundle_has(bundle: Path, commit: str) -> bool:
    """Does the bundle carry `commit` (as a head, or in the history of one)?"""
    with tempfile.TemporaryDirectory(prefix="bundle-") as tmp:
        _git("init", "-q", "--bare", tmp)
        fetched = _git("--git-dir", tmp, "fetch", "-q", str(bundle), "refs/*:refs/*")
        if fetched.returncode != 0:
            raise UserError(f"{bundle}: not a git bundle git can read: {fetched.stderr.strip()[-200:]}")
        return _git("--git-dir", tmp, "cat-file", "-e", f"{commit}^{{commit}}").returncode == 0


def tree_version(root: Path) -> str | None:
    """The version a torch_npu tree builds: setup.py's VERSION, or version.txt."""
    setup = root / "setup.py"
    if setup.is_file():
        m = VERSION_LINE.search(setup.read_text(errors="replace"))
        if m:
            return m.group(1)
    txt = root / "version.txt"
    return txt.read_text().strip() if txt.is_file() else None


# ---------------------------------------------------------------------------- one tree

def _extract(archive: Path, dest: Path) -> None:
    """A tarball's files under dest, its single top folder (git archive --prefix) taken off."""
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name not in ("pax_global_header",)]
        tops = {m.name.split("/", 1)[0] for m in members}
        strip = len(tops) == 1 and any("/" in m.name for m in members)
        tmp = dest.parent / (dest.name + ".x")
        if hasattr(tarfile, "data_filter"):          # Python 3.11.4 and later: no links out of the tree
            tar.extractall(tmp, members=members, filter="data")
        else:
            tar.extractall(tmp, members=members)
    os.replace(tmp / next(iter(tops)) if strip else tmp, dest)
    shutil.rmtree(tmp, ignore_errors=True)


def _materialize(location: Path, commit: str | None, dest: Path) -> str | None:
    """A tree from a bundle or a tarball at dest; the commit it is (None when not known)."""
    if location.name.endswith(ARCHIVES):
        got = tar_commit(location)
        if commit and got and got != commit:
            raise UserError(f"{location} is commit {got[:12]}, not {commit[:12]}")
        _extract(location, dest)
        return got
    if location.name.endswith(".bundle"):
        out = _git("clone", "-q", "--no-checkout", "--", str(location), str(dest))
        if out.returncode != 0:
            raise UserError(f"{location}: not a git bundle git can read: {out.stderr.strip()[-200:]}")
        target = commit or "HEAD"
        out = _git("-c", "advice.detachedHead=false", "checkout", "-q", target, cwd=dest)
        if out.returncode != 0:
            raise UserError(f"{location} does not carry commit {target[:12]}: {out.stderr.strip()[-200:]}")
        return head_commit(dest)
    raise UserError(f"{location}: a source is a folder (a checkout or a plain tree), a git bundle (.bundle) "
                    f"or a tarball ({', '.join(ARCHIVES)})")


def _clone(url: str, ref: str, dest: Path) -> None:
    for value, what in ((url, "a source URL"), (ref, "a ref")):
        if value.startswith("-"):
            raise UserError(f"{value!r} is not {what}: a value that begins with - would be read as an option of git")
    # A password in the URL goes to git by its environment: a command line is anyone's to read.
    bare, env = credentials.git_url(url)
    out = _git("clone", "-q", "--depth", "1", "--branch", ref, "--", bare, str(dest), env=env)
    if out.returncode != 0:                         # a commit, not a branch or tag: fetch it by id
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for step in (["init", "-q"], ["fetch", "-q", "--depth", "1", "--", bare, ref], ["checkout", "-q", "FETCH_HEAD"]):
            out = _git(*step, cwd=dest, env=env)
            if out.returncode != 0:
                break
    if out.returncode != 0:
        raise UserError(f"cannot fetch {credentials.redact(url)}@{ref}: "
                        f"{credentials.redact(out.stderr.strip()[-300:])}\n"
                        f"Pass the source instead: a checkout with its submodules, a git bundle or a tarball "
                        f"(--src PATH, --submodule-src PATH).")


# ---------------------------------------------------------------------------- checks

def _subdir_empty(path: Path) -> bool:
    return not path.is_dir() or not any(p for p in path.iterdir() if p.name != ".git")


def _gitmodules_urls(root: Path) -> dict[str, str]:
    out = _git("config", "-f", str(root / ".gitmodules"), "--get-regexp", r"submodule\..*\.url") \
        if (root / ".gitmodules").is_file() else None
    urls = {}
    for line in (out.stdout.splitlines() if out and out.returncode == 0 else []):
        key, _, url = line.partition(" ")
        urls[key[len("submodule."):-len(".url")]] = url
    return urls


def verify(root: Path, expect: Expected, plain: bool, known: dict[str, str] | None = None) -> dict[str, str]:
    """Refuse a tree that is not what it must be, before compiling; the submodules' commits
    (`known`: those checked already, as tarballs of their commit)."""
    urls = {**_gitmodules_urls(root), **expect.urls}
    if expect.commit and not plain:
        got = head_commit(root)
        if got and got != expect.commit:
            raise UserError(f"{root} is commit {got[:12]}, not {expect.what}, which is commit {expect.commit[:12]}: "
                            f"check out that tag (a release branch moves on after the release)")
    if expect.version:
        got_version = tree_version(root)
        if got_version and got_version != expect.version:
            raise UserError(f"{root} builds torch_npu {got_version}, not {expect.version} ({expect.what}); "
                            f"a source build must be the stack's release")
    found: dict[str, str] = {}
    for sub, commit in sorted(expect.submodules.items()):
        where = root / sub
        source = credentials.redact(urls.get(sub, "its repository, as .gitmodules names it"))
        if _subdir_empty(where):
            raise UserError(f"{sub} is missing or empty in {root}: {expect.what} needs it at commit {commit} "
                            f"({source}). In a checkout: git submodule update --init {sub}; offline: "
                            f"--submodule-src with a bundle or tarball of that commit")
        got = head_commit(where)
        if got and got != commit:
            raise UserError(f"{sub} in {root} is commit {got[:12]}, but {expect.what} needs {commit} ({source}): "
                            f"git submodule update {sub}")
        found[sub] = got or (known or {}).get(sub) or "tree"
    return found


# ---------------------------------------------------------------------------- assembly

def _destination(cache: Path, key: str) -> Path:
    return cache / "sources" / hashlib.sha256(key.encode()).hexdigest()[:16]


def _publish(tmp: Path, dest: Path) -> None:
    with interrupts.deferred():
        try:
            os.replace(tmp, dest)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not dest.is_dir():              # not a concurrent run that got there first
                raise


def _place_submodules(root: Path, expect: Expected, given: list[Path], online: bool) -> dict[str, str]:
    """Fill each needed submodule folder that is empty: from the given bundles/tarballs (the
    one that is its commit), else online from .gitmodules' URL at the pinned commit. The
    commits placed."""
    placed: dict[str, str] = {}
    urls = {**_gitmodules_urls(root), **expect.urls}
    for sub, commit in sorted(expect.submodules.items()):
        where = root / sub
        if not _subdir_empty(where):
            continue
        source = next((g for g in given if _provides(g, commit)), None)
        shutil.rmtree(where, ignore_errors=True)
        where.parent.mkdir(parents=True, exist_ok=True)
        if source is not None:
            _materialize(source, commit, where)
            placed[sub] = commit
        elif online and sub in urls:
            _clone(urls[sub], commit, where)
            placed[sub] = commit
    return placed


def _provides(location: Path, commit: str) -> bool:
    if location.is_dir():
        return head_commit(location) == commit
    if location.name.endswith(ARCHIVES):
        return tar_commit(location) == commit
    if location.name.endswith(".bundle"):
        return bundle_has(location, commit)
    return False


def checkout(location: str, ref: str | None, cache: Path, expect: Expected | None = None,
             submodule_sources: list[Path] | None = None) -> Checkout:
    """The tree to build, checked against `expect`: a folder as given (a plain tree or a
    checkout), else a copy in the cache made from a bundle, a tarball or a clone."""
    expect = expect or Expected("the source")
    given = list(submodule_sources or [])
    for g in given:
        if not g.exists():
            raise UserError(f"--submodule-src {g}: no such file or folder")
    path = Path(location)
    if path.is_dir() and ref is None and not given:
        plain = head_commit(path) is None
        subs = verify(path, expect, plain)
        return Checkout(path.resolve(), _revision(path, plain, subs), str(path.resolve()))
    commit = expect.commit
    key = f"{location}@{ref}@{commit}@" + ",".join(sorted(map(str, given)))
    dest = _destination(cache, key)
    if not (dest / ".ascend-build-source").is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".src-", dir=dest.parent))
        try:
            tree = tmp / "tree"
            if path.is_dir():
                shutil.copytree(path, tree, symlinks=True)
            elif path.is_file():
                _materialize(path, commit, tree)
            else:
                _clone(location, ref or commit or "HEAD", tree)
            placed = _place_submodules(tree, expect, given, online=not path.exists())
            plain = head_commit(tree) is None
            subs = verify(tree, expect, plain, placed)
            got = head_commit(tree) or (tar_commit(path) if path.is_file() and path.name.endswith(ARCHIVES) else None)
            if commit and got and got != commit:
                raise UserError(f"{credentials.redact(location)} is commit {got[:12]}, not {expect.what}, "
                                f"commit {commit[:12]}")
            (tree / ".ascend-build-source").write_text(_revision(tree, plain and not got, subs, got) + "\n")
            _publish(tree, dest)
        finally:
            with interrupts.deferred():
                shutil.rmtree(tmp, ignore_errors=True)
    revision = (dest / ".ascend-build-source").read_text().strip()
    origin = credentials.redact(location)          # said in the log and kept beside the wheel
    return Checkout(dest, revision, f"{origin}@{ref}" if ref else origin)


def _revision(root: Path, plain: bool, subs: dict[str, str], commit: str | None = None) -> str:
    """What the wheel cache keys on: the commit and every submodule's, or the tree's hash.
    A checkout at the release's commits but with changes in it (edited, added or deleted
    files, in the top level or a submodule) is not the release: its key is the tree's whole
    content, marked modified, and it is said so."""
    top = commit or head_commit(root)
    if plain and not top:
        return tree_hash(root)
    if any(c == "tree" for c in subs.values()):
        return f"{top}+{tree_hash(root)}"
    changed = local_changes(root, subs)
    if changed:
        console.warn(f"{root}: changed since its commits ({len(changed)}: {', '.join(changed[:5])}"
                     f"{', ...' if len(changed) > 5 else ''}): built as a modified tree, not as the release, and "
                     f"cached under its content")
        return f"{top}+modified-{tree_hash(root)}"
    return top + "".join(f"+{p}@{c}" for p, c in sorted(subs.items()))  # type: ignore[operator]


def local_changes(root: Path, subs: dict[str, str]) -> list[str]:
    """Paths git sees changed (edited, added, deleted; ignored files aside) in the checkout
    and in each submodule that is a checkout."""
    changed = []
    for where in [Path(".")] + [Path(s) for s in sorted(subs)]:
        if head_commit(root / where) is None:
            continue
        out = _git("status", "--porcelain", "--untracked-files=all", "--ignore-submodules=all", cwd=root / where)
        changed += [str(where / line[3:]) if str(where) != "." else line[3:]
                    for line in out.stdout.splitlines() if line.strip()]
    return changed


def repository_with(location: Path, commit: str, cache: Path, what: str) -> Path:
    """A git repository holding `commit` for a build script that clones and checks it out:
    a checkout's (or a mirror's) git directory as it is, or a bundle cloned into the cache.
    A tarball cannot be one: it has no history."""
    if location.is_dir():
        gitdir = location / ".git" if (location / ".git").is_dir() else location
        if _git("--git-dir", str(gitdir), "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
            raise UserError(f"--submodule-src {location}: {what} there has no commit {commit}, which the build "
                            f"script checks out")
        return gitdir.resolve()
    if not location.name.endswith(".bundle"):
        raise UserError(f"--submodule-src {location}: {what} must be a git bundle or a checkout (the build script "
                        f"checks out commit {commit}; a tarball has no history)")
    if not bundle_has(location, commit):
        raise UserError(f"--submodule-src {location}: the bundle does not carry {what} {commit}")
    dest = _destination(cache, f"{location}@{commit}")
    if not dest.is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".repo-", dir=dest.parent))
        out = _git("clone", "-q", "--bare", "--", str(location), str(tmp / "r.git"))
        if out.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise UserError(f"--submodule-src {location}: {out.stderr.strip()[-200:]}")
        _publish(tmp / "r.git", dest)
        shutil.rmtree(tmp, ignore_errors=True)
    return dest
