"""The user layer suite: run by `invoke build --requirements FILE` on every layer
candidate, after the runtime suite (inherited), before the layer is tagged."""
from __future__ import annotations

import json

from packaging.requirements import Requirement

from ascend_build.locking.layerlock import LayerLock
from ascend_build.locking.lock import normalize, pinned_versions

# Run inside the image, in a plain `docker run`: each distribution's top-level modules
# (top_level.txt, else its RECORD) imported one by one.
_IMPORTS = r"""
import importlib, importlib.metadata as md, json, sys
out = {}
for name in sys.argv[1:]:
    dist = md.distribution(name)
    tops = set((dist.read_text("top_level.txt") or "").split())
    if not tops:
        for f in dist.files or []:
            first = f.parts[0] if f.parts else ""
            if first in ("..", "__pycache__") or first.endswith((".dist-info", ".data")):
                continue
            tops.add(first[:-3] if first.endswith(".py") else first.split(".")[0] if len(f.parts) == 1 else first)
    tops = sorted(t for t in tops if t.isidentifier())
    errors = {}
    for module in tops:
        try:
            importlib.import_module(module)
        except BaseException as exc:
            errors[module] = f"{type(exc).__name__}: {exc}"
    out[name] = {"modules": tops, "errors": errors}
print(json.dumps(out))
"""


def _installed(distributions) -> dict[str, str]:
    return distributions.versions(normalize, site=True)


def test_layer_packages_are_its_lock(distributions, layer_lock):
    locked = pinned_versions({"layer": layer_lock})
    assert locked, "the layer's lock names no package"
    installed = _installed(distributions)
    assert {n: installed.get(n) for n in locked} == locked


def test_runtime_packages_did_not_move(distributions, layer_lock):
    """Every package the lock held (the runtime's) is still at its version."""
    held = LayerLock(None, layer_lock).held
    assert "torch" in held and "torch-npu" in held
    installed = _installed(distributions)
    assert {n: installed.get(n) for n in held} == held


def test_each_requirement_imports(docker_run, layer_lock):
    wanted = [line.split(": ", 1)[1] for line in layer_lock.splitlines() if line.startswith("# requirement: ")]
    names = [normalize(Requirement(w).name) for w in wanted]
    assert names, "the lock records no requirement"
    result = docker_run("python", "-c", _IMPORTS, *names)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert {n: found[n]["errors"] for n in names} == {n: {} for n in names}
    assert all(found[n]["modules"] for n in names), found


def test_labels_name_the_layer(labels, layer_name, layer_lock):
    from ascend_build.images.kinds import LABEL_PREFIX
    assert labels[f"{LABEL_PREFIX}.kind"] == "layer"
    assert labels[f"{LABEL_PREFIX}.layer-lock"].endswith(LayerLock(None, layer_lock).sha256[:16])


def test_the_sbom_lists_the_layer_packages_with_their_locked_sums(host, layer_lock):
    from ascend_build.locking.lock import Lock
    from ascend_build.provenance.sbom import SBOM_PATH
    doc = json.loads(host.file(SBOM_PATH).content_string)
    libraries = {c["bom-ref"]: c for c in doc["components"] if c["type"] == "library"}
    for pin in Lock(None, "", {"layer": layer_lock}).packages:
        entry = libraries.get(f"pypi:{pin.name}")
        assert entry and entry["version"] == pin.version, pin.name
        assert entry.get("hashes") and entry["hashes"][0]["content"] in pin.hashes, pin.name
