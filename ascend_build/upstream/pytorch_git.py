"""torch_npu's releases as git tags, read from a copy of Ascend/pytorch (`invoke update
--pytorch-git PATH|URL`): each release tag's commit, the version its setup.py builds, the
commits of the submodules a build compiles, and the offline flags its ci/build.sh takes.

Release branches move on after a release (branch v2.1.0-6.0.rc3 builds 2.1.0.post9 today,
where 2.1.0.post8 is the tag v6.0.rc3-pytorch2.1.0), so a source build names a tag and
checks its commit; the version comes from the tree itself, never from the tag's name."""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from ..engine import credentials
from ..errors import UserError
from ..matrix.records import TorchNpuTag  # what is read here is what the matrix loads

# v6.0.rc3-pytorch2.1.0, v7.0.0-pytorch2.1.0, v26.0.0-pytorch2.10.0; not the alphas
RELEASE_TAG = re.compile(r"^v(\d+\.\d+\.(?:rc\d+|\d+))-pytorch(\d+\.\d+\.\d+)$")
VERSION_LINE = re.compile(r"^VERSION\s*=\s*['\"]([^'\"]+)['\"]", re.M)


def _git(gitdir: Path, *args: str) -> str:
    out = subprocess.run(["git", "--git-dir", str(gitdir), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise UserError(f"git {' '.join(args)} in {gitdir}: {out.stderr.strip()[-300:]}")
    return out.stdout


def git_dir(location: str, work: Path) -> tuple[Path, str]:
    """The git directory of a local copy (a checkout or a bare mirror), or of a bare clone
    of a URL made in `work`; and how to name it in the matrix."""
    path = Path(location)
    if path.exists():
        for candidate in (path / ".git", path):
            if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
                return candidate, location
        raise UserError(f"--pytorch-git {location}: not a git checkout or a bare repository")
    shown = credentials.redact(location)
    if location.startswith("-"):
        raise UserError(f"--pytorch-git {shown!r}: not a URL or a path (a value that begins with - would be "
                        f"read as an option of git)")
    dest = work / "pytorch.git"
    # A password in the URL goes to git by its environment (a command line is anyone's to
    # read), and the matrix names the URL without it.
    bare, env = credentials.git_url(location)
    out = subprocess.run(["git", "clone", "--bare", "--quiet", "--", bare, str(dest)], capture_output=True,
                         text=True, env={**os.environ, **env})
    if out.returncode != 0:
        raise UserError(f"--pytorch-git {shown}: cannot clone: {credentials.redact(out.stderr.strip()[-300:])}\n"
                        f"Pass a local copy of Ascend/pytorch (a clone or mirror with its tags) instead.")
    return dest, bare


def tree_version(gitdir: Path, commit: str) -> str | None:
    """The version a tree builds: setup.py's VERSION, or version.txt (from 2.10)."""
    setup = subprocess.run(["git", "--git-dir", str(gitdir), "show", f"{commit}:setup.py"],
                           capture_output=True, text=True).stdout
    m = VERSION_LINE.search(setup)
    if m:
        return m.group(1)
    txt = subprocess.run(["git", "--git-dir", str(gitdir), "show", f"{commit}:version.txt"],
                         capture_output=True, text=True)
    return txt.stdout.strip() or None if txt.returncode == 0 else None


def read_tags(gitdir: Path, submodules: list[str], flags: list[str]) -> tuple[dict[str, TorchNpuTag], list[str]]:
    """Every release tag's record by version, and what was skipped or doubled (said, not hidden)."""
    records: dict[str, TorchNpuTag] = {}
    notes: list[str] = []
    refs = _git(gitdir, "for-each-ref", "--format=%(refname:strip=2) %(objectname) %(*objectname)", "refs/tags")
    for line in sorted(refs.splitlines()):
        parts = line.split()
        if not parts or not RELEASE_TAG.match(parts[0]):
            continue
        tag, commit = parts[0], parts[2] if len(parts) > 2 else parts[1]
        version = tree_version(gitdir, commit)
        if not version:
            notes.append(f"{tag}: no VERSION in setup.py nor version.txt; skipped")
            continue
        links = {}
        for entry in _git(gitdir, "ls-tree", "-r", commit, "third_party").splitlines():
            mode, kind, sha, path = entry.split(maxsplit=3)
            if kind == "commit" and path in submodules:
                links[path] = sha
        build = subprocess.run(["git", "--git-dir", str(gitdir), "show", f"{commit}:ci/build.sh"],
                               capture_output=True, text=True).stdout
        record = TorchNpuTag(version, tag, commit, links, tuple(f for f in flags if f in build))
        if version in records and records[version].commit != commit:
            notes.append(f"{version}: built by both {records[version].tag} and {tag}; kept {records[version].tag}")
            continue
        records[version] = record
    return records, notes


def update(matrix_path: Path, location: str) -> tuple[Path, str, str, list[str]]:
    """The imported facts' file with its torch_npu_tags read again from `location`: (its
    path, its text before, its new text, notes). Nothing else in it changes."""
    from ..matrix.imported import emit
    from ..matrix.load import load_matrix, load_text
    from ..matrix.yamlsource import safe_load
    m = load_matrix(matrix_path)                 # the tags are read for this matrix's build settings
    build = m.torch_npu_build
    with tempfile.TemporaryDirectory(prefix="ascend-pytorch-") as tmp:
        gitdir, origin = git_dir(location, Path(tmp))
        records, notes = read_tags(gitdir, list(build.submodules) if build else [], list(build.flags) if build else [])
    if not records:
        raise UserError(f"--pytorch-git {credentials.redact(location)}: no release tags "
                        f"(v<TorchNPU>-pytorch<torch>) found")
    # a local copy is named by what it copies: no path of this machine goes into the file
    repo = m.sources["torch_npu"].repo if "torch_npu" in m.sources else "Ascend/pytorch"
    before = m.files.imported.read_text()
    data = safe_load(before) or {}
    data["torch_npu_tags"] = {"source": f"a copy of {repo}" if Path(location).exists() else origin, "tags": {
        v: {"tag": r.tag, "commit": r.commit, "submodules": dict(sorted(r.submodules.items())), "flags": list(r.flags)}
        for v, r in records.items()}}
    text = emit(data)
    load_text(matrix_path.read_text(), matrix_path, text)     # a valid matrix with it, or nothing is written
    wanted = {st.package for st in m.stacks.values() if st.torch}
    missing = sorted(v for v in wanted if v not in records)
    notes.append(f"release tags read: {len(records)}; stacks' torch_npu with a tag: {len(wanted) - len(missing)} "
                 f"of {len(wanted)}" + (f" (none for {', '.join(missing)})" if missing else ""))
    return m.files.imported, before, text, notes
