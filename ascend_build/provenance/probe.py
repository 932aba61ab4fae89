"""What is inside an image, read by the image's own Python in a container without network:
the OS release, the OS packages (dpkg or rpm), every Python distribution of the venv with
its wheel tags, `pip freeze --all`, the requirement files the image carries, and the
files the caller names (globs below the CANN toolkit home, e.g. the install records)."""
from __future__ import annotations

import json

from ..engine import Engine, RunSpec
from ..errors import EngineError

SHARE = "/usr/local/share/ascend-build"
REQUIREMENTS = f"{SHARE}/requirements"
MANIFEST = f"{SHARE}/manifest.txt"
SBOM_PATH = f"{SHARE}/sbom.cdx.json"
PROBE_TIMEOUT = 900          # seconds: a Python start and a pip freeze, under qemu on a slow day

# Run inside the image: what is installed, as JSON on stdout. argv[1]: JSON list of globs,
# relative to $ASCEND_TOOLKIT_HOME unless absolute.
_PROBE = r"""
import glob, json, os, pathlib, site, subprocess, sys, importlib.metadata as md
def run(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        return None
    return out.stdout if out.returncode == 0 else None
def wheel_tags(d):
    text = d.read_text("WHEEL") or ""
    return [line[5:].strip() for line in text.splitlines() if line.startswith("Tag:")]
home = os.environ.get("ASCEND_TOOLKIT_HOME", "")
files = {}
for pattern in json.loads(sys.argv[1]):
    full = pattern if pattern.startswith("/") else os.path.join(home, pattern)
    for path in sorted(glob.glob(full)):
        if os.path.isfile(path):
            files[path] = pathlib.Path(path).read_text(errors="replace")
req = pathlib.Path("%(req)s")
manifest = pathlib.Path("%(manifest)s")
print(json.dumps({
    "os_release": pathlib.Path("/etc/os-release").read_text(),
    "deb": run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${Architecture}\n"]),
    "rpm": run(["rpm", "-qa", "--qf", "%%{NAME}\t%%{VERSION}-%%{RELEASE}\t%%{ARCH}\n"]),
    "python": [{"name": d.metadata["Name"], "version": d.version, "tags": wheel_tags(d)}
               for d in md.distributions(path=site.getsitepackages())],
    "freeze": run([sys.executable, "-m", "pip", "freeze", "--all"]) or "",
    "requirements": {p.stem: p.read_text() for p in req.glob("*.txt")} if req.is_dir() else {},
    "manifest": manifest.read_text() if manifest.is_file() else None,
    "toolkit_home": home,
    "files": files,
}))
""" % {"req": REQUIREMENTS, "manifest": MANIFEST}  # noqa: UP031 (Python source: braces are its own)


def probe(engine: Engine, image: str, platform: str, globs: tuple[str, ...] = ()) -> dict:
    out = engine.run_container(RunSpec(image, ("-c", _PROBE, json.dumps(list(globs))), platform=platform,
                                       network="none", entrypoint="python"), timeout=PROBE_TIMEOUT)
    if out.returncode != 0:
        raise EngineError(f"could not read the packages of {image}: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout)
