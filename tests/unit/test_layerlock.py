"""User layers before any build: parsing a team's requirements, the refusal of one that
would move a held package (naming the requirement, the package and the pin), the lock's
reuse when the runtime changes, and the layer kind's place in the image graph. The
resolver is a double here (`UvDouble`: answers like uv for a tiny made-up index);
tests/integration/test_user_layer.py runs the real one against PyPI and a real image."""
from __future__ import annotations

from pathlib import Path

import pytest

from ascend_build.errors import UserError
from ascend_build.images.catalog import KINDS
from ascend_build.images.kinds import LAYER, suites
from ascend_build.locking import layer_resolve, layerlock, resolve
from ascend_build.locking import lock as locks
from ascend_build.matrix import load_text
from tests.conftest import copy_matrix, link_locks


def _cell(tmp_path: Path):
    path = copy_matrix(tmp_path)
    link_locks(path)
    m = load_text(path.read_text(), path)
    cell = m.cell("2.1.0", "debian12", "3.11", None, "linux/arm64")
    return m, cell, layerlock.held(cell, locks.for_cell(m, cell, tmp_path))


class UvDouble:
    """Stands in for uv: `einops` needs nothing; `tensorboard` needs protobuf>=4 (so it
    fails while protobuf is held at 3.20.3); `oldlib` needs nothing either. Records calls."""
    NEEDS = {"einops": {}, "oldlib": {}, "tensorboard": {"protobuf": "5.29.3"}}

    def __init__(self):
        self.calls: list[dict] = []

    def __call__(self, ins, python, arch, net, *, constraints=(), prefer=None, extra_index=None, find_links=None,
                 glibc=None):
        self.calls.append({"ins": ins, "constraints": list(constraints), "prefer": prefer})
        held = dict(c.split("==") for c in constraints)
        out = {}
        for line in ins["layer"]:
            name = line.split("=")[0].split(">")[0].split("<")[0].strip()
            for dep, version in self.NEEDS[name].items():
                if dep in held and held[dep] != version:
                    return (f"Because {name} depends on {dep}>=4 and you require {dep}=={held[dep]}, "
                            "we can conclude that your requirements are unsatisfiable.")
                out[dep] = (version, [name])
            out[name] = ((prefer or {}).get(name, "0.8.1"), ["-r layer.in"])
        for name, version in held.items():      # uv lists the held ones it touched too
            if name == "numpy":
                out[name] = (version, ["einops"])
        return out


@pytest.fixture
def uv(monkeypatch):
    double = UvDouble()
    monkeypatch.setattr(layer_resolve, "uv_compile", double)
    monkeypatch.setattr(layer_resolve, "uv_version", lambda: "uv (double)")
    monkeypatch.setattr(resolve.Index, "files", lambda self, project: [
        (f"{project}-{v}-py3-none-any.whl", "7" * 64) for v in ("0.8.1", "0.9.0", "5.29.3")])
    return double


NET = resolve.Network(pip_index_url="https://index.invalid/simple")


def test_requirement_lines_are_parsed_and_options_refused(tmp_path):
    good = tmp_path / "team.txt"
    good.write_text("# our deps\neinops>=0.7  # tensors\n\nrich[jupyter]; python_version >= '3.8'\n")
    assert [(line.number, line.name) for line in layerlock.parse(good)] == [(2, "einops"), (4, "rich")]
    for text, said in (("-e ./src\n", "requirement lines only"), ("einops>>1\n", "is not a requirement"),
                       ("pkg @ https://x.invalid/p.whl\n", "URL requirements"), ("# nothing\n", "no requirements")):
        good.write_text(text)
        with pytest.raises(UserError, match=said):
            layerlock.parse(good)


def test_a_requirement_on_a_held_package_is_refused_offline_naming_the_pin(tmp_path):
    m, cell, hold = _cell(tmp_path)
    assert hold.versions["protobuf"] == "3.20.3" and hold.versions["torch"] == "2.1.0"
    reqs = tmp_path / "team.txt"
    reqs.write_text("einops\nprotobuf>=4\ntorch==2.1.0\n")
    said = layerlock.direct_conflicts(layerlock.parse(reqs), hold, reqs)
    assert len(said) == 1
    assert f"{reqs} line 2: `protobuf>=4` would move protobuf away from 3.20.3" in said[0]
    assert "locks/2.1.0/py3.11-aarch64/torch.txt" in said[0]
    assert 'stacks."2.1.0".pins (protobuf==3.20.3)' in said[0]


def test_a_transitive_move_is_found_and_named(tmp_path, uv):
    m, cell, hold = _cell(tmp_path)
    reqs = tmp_path / "team.txt"
    reqs.write_text("einops\ntensorboard\n")
    with pytest.raises(layerlock.LayerConflict) as exc:
        layer_resolve.lock_layer("team", reqs, layerlock.parse(reqs), cell, hold, NET, None)
    said = str(exc.value)
    assert f"{reqs} line 2: `tensorboard` would move protobuf from 3.20.3 to 5.29.3" in said
    assert "held by protobuf==3.20.3" in said and "nothing was built" in said
    assert "`einops`" not in said, "einops resolves with the stack held: it is not blamed"
    assert not layerlock.folder(reqs).exists(), "a refused layer writes no lock"


def test_the_lock_holds_the_runtime_and_lists_only_the_new_packages(tmp_path, uv):
    m, cell, hold = _cell(tmp_path)
    reqs = tmp_path / "team.txt"
    reqs.write_text("einops\n")
    lock, said = layer_resolve.lock_layer("team", reqs, layerlock.parse(reqs), cell, hold, NET, None)
    assert lock.path == tmp_path / "team.lock" / "2.1.0-py3.11-aarch64.txt" and lock.path.is_file()
    assert lock.packages == {"einops": "0.8.1"}       # numpy came back from the resolver but is held
    assert lock.held == hold.versions
    assert "--require-hashes" in lock.text and "# requirement: einops" in lock.text
    assert uv.calls[0]["constraints"] == [f"{n}=={v}" for n, v in sorted(hold.versions.items())]
    assert "made (1 packages)" in said[0]


def test_a_lock_is_reused_when_current_and_says_what_changed_when_the_runtime_moved(tmp_path, uv):
    m, cell, hold = _cell(tmp_path)
    reqs = tmp_path / "team.txt"
    reqs.write_text("einops\n")
    first, _ = layer_resolve.lock_layer("team", reqs, layerlock.parse(reqs), cell, hold, NET, None)
    calls = len(uv.calls)
    again, said = layer_resolve.lock_layer("team", reqs, layerlock.parse(reqs), cell, hold, None, None)
    assert again.text == first.text and len(uv.calls) == calls and "is current" in said[0]
    # A torch_npu bump in the runtime: the old lock is the preference, the same packages come out.
    bumped = layerlock.Held({**hold.versions, "torch-npu": "2.1.0.post10"}, hold.lock, cell)
    with pytest.raises(UserError, match="must be remade and no package index"):
        layer_resolve.lock_layer("team", reqs, layerlock.parse(reqs), cell, bumped, None, None)
    new, said = layer_resolve.lock_layer("team", reqs, layerlock.parse(reqs), cell, bumped, NET, None)
    assert uv.calls[-1]["prefer"] == {"einops": "0.8.1"}
    assert "~ torch-npu 2.1.0.post8 -> 2.1.0.post10" in "\n".join(said)
    assert "the lock still holds" in said[-1]
    assert new.held["torch-npu"] == "2.1.0.post10" and new.packages == first.packages


def test_the_layer_kind_inherits_the_runtime_suite():
    assert suites(LAYER) == ["layer_image", "image"]      # its own first: a failure there ends the run
    assert suites(KINDS["runtime"]) == ["image"]
    assert LAYER.tags("repo", "cann8.0.rc3-910b-debian12-py3.11-torch2.1.0-team", "sha-1",
                      __import__("ascend_build.platforms", fromlist=["PLATFORMS"]).PLATFORMS["linux/arm64"]
                      ).readable == "repo:cann8.0.rc3-910b-debian12-py3.11-torch2.1.0-team-arm64"


def test_a_layer_name_must_fit_in_a_tag(tmp_path):
    from ascend_build.images.userlayer import LayerRequest
    assert LayerRequest.of(tmp_path / "Team Deps.txt", "team").name == "team"
    with pytest.raises(UserError, match="pass --layer-name"):
        LayerRequest.of(tmp_path / "Team Deps.txt")


def test_a_layer_holds_the_runtime_lock_the_build_takes_and_none_is_refused_even_unlocked(tmp_path):
    """A matrix copied elsewhere: the layer holds the project's lock, as the runtime build
    takes it (same inputs); a cell with no lock has nothing to hold, --unlocked or not."""
    from ascend_build.images import userlayer
    from ascend_build.inputs.options import Site
    from tests.conftest import committed_matrix_text
    reqs = tmp_path / "team.txt"
    reqs.write_text("einops==0.8.1\n")
    req = userlayer.LayerRequest.of(reqs)
    path = copy_matrix(tmp_path / "elsewhere")          # no locks/ beside it
    m = load_text(path.read_text(), path)
    cell = m.cell("2.1.0", "debian12", "3.11", None, "linux/arm64")
    lock = userlayer.prepare(m, cell, Site(dry=True), req).lock
    assert lock.path == layerlock.path_for(reqs, cell)
    other = copy_matrix(tmp_path / "other", committed_matrix_text().replace('numpy: "<2"}      # new protobuf',
                                                                           'numpy: "<1.26"}  #', 1))
    m = load_text(other.read_text(), other)
    with pytest.raises(UserError, match=r"2\.1\.0 / Python 3\.11 / aarch64 has no lock: a user layer .* \(--unlocked "
                                        r"builds a runtime image without a lock, never a layer on it\)"):
        userlayer.prepare(m, m.cell("2.1.0", "debian12", "3.11", None, "linux/arm64"), Site(dry=True, unlocked=True),
                          req)
