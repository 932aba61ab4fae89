"""The upload-artifact double's step (see action.yml): inputs from the environment."""
import glob
import os
import shutil
import sys
from pathlib import Path


def search_root(pattern: str) -> Path:
    """The folder (or file) a pattern's walk starts at: its parts before the first glob."""
    parts = Path(os.path.abspath(os.path.expanduser(pattern))).parts
    fixed = [p for p in parts[:next((i for i, p in enumerate(parts) if set(p) & set("*?[")), len(parts))]]
    return Path(*fixed)


def hidden(path: Path, root: Path) -> bool:
    # As @actions/glob's excludeHiddenFiles: the walk skips any item whose name starts with
    # a dot, from the search root itself down (so `.build/*/build.log` matches nothing).
    return any(part.startswith(".") for part in (root.name, *path.relative_to(root).parts))


def matched(patterns: list[str], with_hidden: bool) -> list[Path]:
    found: set[Path] = set()
    for pattern in patterns:
        root = search_root(pattern)
        for name in glob.glob(os.path.abspath(os.path.expanduser(pattern)), recursive=True, include_hidden=True):
            path = Path(name)
            for f in ([path] if path.is_file() else path.rglob("*")):
                if f.is_file() and (with_hidden or not hidden(f, root)):
                    found.add(f)
    return sorted(found)


def main() -> int:
    name, none = os.environ["NAME"], os.environ["NONE"]
    files = matched([p.strip() for p in os.environ["PATHS"].splitlines() if p.strip()],
                    os.environ["HIDDEN"] == "true")
    if not files:
        message = f"No files were found with the provided path: {os.environ['PATHS'].strip()}. No artifacts will be uploaded."
        if none == "error":
            print(f"::error::{message}")
            return 1
        if none == "warn":
            print(f"::warning::{message}")
        return 0
    store = os.environ.get("ACTION_DOUBLE_ARTIFACTS")
    if not store:
        print("::error::upload-artifact double: ACTION_DOUBLE_ARTIFACTS (the runner's artifact folder) is not set")
        return 1
    root = Path(os.path.commonpath([str(f.parent) for f in files]))
    for f in files:
        target = Path(store) / name / f.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    print(f"upload-artifact double: {len(files)} files as {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
