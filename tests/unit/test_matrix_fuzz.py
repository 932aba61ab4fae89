"""Matrix fuzzing: mutated matrices, matrix.yaml and the imported facts beside it (keys
deleted, renamed or added, values of any type), either load into a usable matrix or are
refused with errors that name a key: never a traceback, and nothing past validation runs."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascend_build.errors import MatrixError, UserError
from ascend_build.images.catalog import render_all
from ascend_build.matrix import load_matrix
from ascend_build.matrix.yamlsource import safe_load

ROOT = Path(__file__).resolve().parents[2]
# Both files as one document, keyed by file name: a mutation may hit either.
TEXT = {name: (ROOT / name).read_text() for name in ("matrix.yaml", "imported.yaml")}
BASE = {name: safe_load(text) for name, text in TEXT.items()}

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 20), st.floats(allow_nan=False, width=16),
                    st.text(max_size=12), st.sampled_from(["2.1.0", "3.10", "3.99", "8.0.RC3", "9.9", "910b", "310p", "linux/arm64",
                                                    "apt", "<2", "two", "==3.20.3", ">=1.24", "manylinux2014", "debian11",
                                                    "/usr/bin/python{X.Y}", "v2.1.0-6.0.rc3", "a" * 64]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=6)


def node_paths(data: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(data, dict):
        for k, v in data.items():
            out += node_paths(v, path + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += node_paths(v, path + (i,))
    return out


PATHS = [p for p in node_paths(BASE) if len(p) > 1]


def _base_nodes() -> dict[int, tuple[Any, yaml.Node]]:
    """id -> (container, its YAML node) for every mapping and list of BASE, represented
    as yaml.dump represents them."""
    nodes = {}
    for doc in BASE.values():
        representer = yaml.representer.SafeRepresenter(default_flow_style=False, sort_keys=False)
        representer.represent_data(doc)
        made = representer.represented_objects
        nodes.update({id(obj): (obj, made[id(obj)]) for obj in representer.object_keeper if id(obj) in made})
    return nodes


BASE_NODES = _base_nodes()


class Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """yaml.dump's safe dumper, to the byte, that takes a container of BASE (one the
    mutations left alone, and so still BASE's object) as the node made for it once: a
    mutated document is represented anew only along the paths the mutations copied."""

    def represent_data(self, data: Any) -> yaml.Node:
        shared = BASE_NODES.get(id(data))
        return shared[1] if shared is not None and shared[0] is data else super().represent_data(data)


def dump(doc: Any) -> str:
    return yaml.dump(doc, Dumper=Dumper, sort_keys=False)


def mutate(data: Any, path: tuple, kind: str, value: Any, name: str) -> Any:
    """`data` with one mutation at `path`: the containers along the path are copied, the
    rest shared with the original (which stays as it is)."""
    data = copy.copy(data)
    parent = data
    for part in path[:-1]:
        parent[part] = copy.copy(parent[part])
        parent = parent[part]
    last = path[-1]
    if kind == "delete":
        del parent[last]
    elif kind == "replace":
        parent[last] = value
    elif kind == "rename" and isinstance(parent, dict):
        parent[name or "x"] = parent.pop(last)
    elif kind == "add" and isinstance(parent, dict):
        parent[name or "extra"] = value
    else:
        parent[last] = value
    return data


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(PATHS), st.sampled_from(["delete", "replace", "rename", "add"]), values,
                          st.text(max_size=8)), min_size=1, max_size=3))
def test_mutated_matrices_never_traceback(tmp_path, mutations):
    data = BASE
    for path, kind, value, name in mutations:
        try:
            data = mutate(data, path, kind, value, name)
        except (KeyError, IndexError, TypeError):
            continue        # an earlier mutation removed that path
    for name, doc in data.items():        # a file no mutation touched is written as it is
        (tmp_path / name).write_text(TEXT[name] if doc is BASE[name] else dump(doc))
    target = tmp_path / "matrix.yaml"
    try:
        matrix = load_matrix(target)
    except MatrixError as exc:
        assert exc.problems
        assert all(p.file in (str(target), str(tmp_path / "imported.yaml")) for p in exc.problems), exc.problems
        for problem in exc.problems:
            assert problem.path and problem.message, problem
        return
    except UserError as exc:     # the imported facts' file renamed to one that is not there
        assert "upstream.imported" in str(exc) and "cannot read" in str(exc), exc
        return
    # It loaded: everything downstream must work or refuse cleanly.
    try:
        matrix.image_cells()
        matrix.cell()
        matrix.builder_cell()
    except UserError:
        return
    try:
        render_all(matrix)
    except UserError as exc:        # e.g. a release used by a stack with its env deleted: refused, said
        assert str(exc), exc


def test_the_dumper_writes_what_yaml_dump_writes():
    """The fuzz writes its documents with Dumper: each kind of mutation, in either file,
    near the top and deep down, dumped as yaml.dump dumps it."""
    plain = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    tried = 0
    for name in BASE:
        paths = [p for p in PATHS if p[0] == name]
        for path in (paths[1], paths[len(paths) // 2], paths[-1]):
            for kind in ("delete", "replace", "rename", "add"):
                doc = mutate(BASE, path, kind, {"a": [1, "two", None]} if kind == "add" else None, "new")[name]
                assert dump(doc) == yaml.dump(doc, Dumper=plain, sort_keys=False), (path, kind)
                tried += 1
    assert tried == 24
