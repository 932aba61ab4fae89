"""No value from the data becomes a Dockerfile instruction or a shell command (issue #74).
The loader refuses such values (test_hostile_data.py); here the renderer is shown to hold
on its own: every template is rendered with hostile text in every data field that reaches
it (the loader's checks bypassed: records changed after loading), and each instruction of
the result is read the way BuildKit and the shell read it. A field's value must stay data:
the same instructions, each with the same words, the hostile text inside the word the
field's placeholder was in; or the renderer refuses it (a line break or control character,
which no Dockerfile word can hold). A field the templates read that no test poisons fails
`test_every_field_the_templates_read_is_poisoned`."""
from __future__ import annotations

import dataclasses
import functools
import re
from typing import Callable

import jinja2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascend_build.errors import UserError
from ascend_build.images import devel, render, serving
from ascend_build.matrix import load_matrix
from ascend_build.matrix.cannenv import CannEnv, EnvVar
from tests.conftest import ROOT

SENTINEL = "zq7sentinel"
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
PAYLOADS = [
    '/x"\nRUN touch /pwned\nENV ZZ="b', "x\r\nRUN touch /pwned", 'a" evil="1', "$(touch /pwned)", "`touch /pwned`",
    "'; touch /pwned; '", '"; touch /pwned; "', "a b", "x,id=y,target=/", "trailing\\", "\\", "${PATH}", "$HOME",
    "a;b&c|d", "*", "~root", "{a,b}", "#not-a-comment", "\u2028RUN x", "\x00", "=", "--mount=type=bind",
]
HOSTILE = st.one_of(st.sampled_from(PAYLOADS), st.text(
    alphabet=st.sampled_from(list("ab/.-_:=,@%+\"'\\$`;&|<>(){}[]*?~# \t\n\r\x0b\x00\x1b\x7f\x85\u2028")),
    min_size=1, max_size=16))


# ---------------------------------------------------------------- reading a Dockerfile as BuildKit does

def instructions(text: str) -> list[str]:
    """The instructions of a Dockerfile, each one logical line: comment lines (also inside
    a continued instruction) and empty lines dropped, a trailing backslash joining the next."""
    out, current = [], None
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("#") or (current is None and not stripped):
            continue
        current = line if current is None else current + line
        if re.search(r"\\[ \t]*$", line):
            current = re.sub(r"\\[ \t]*$", "", current)
            continue
        out.append(current.strip())
        current = None
    if current is not None:
        out.append(current.strip())
    return out


MARK = "\x00"       # an expansion or an operator the lexer saw unquoted: never data


def words(text: str, shell: bool) -> list[str]:
    """An instruction's words: the shell's rules (RUN) or the Dockerfile's (the rest).
    Quotes and escapes are removed as they would be; what would expand, glob or end a
    command ($, a backtick, ; & | ( ) < >, globs and braces) is marked, never plain text;
    a command substitution's own words are read as a command, inside its mark."""
    found, end = _scan(text, 0, shell, nested=False)
    assert end == len(text), text
    return found


# Runs of characters no rule of _scan's treats apart (outside quotes; inside double quotes),
# taken at once: the scan reads a rendered Dockerfile's long lines one character at a time
# otherwise. A character that begins no run (a lone backslash in double quotes, say) is
# added by itself, as before.
_PLAIN = {True: re.compile(r"[^ \t;&|()<>'\"\\$`*?\[{}~]+"), False: re.compile(r"[^ \t'\"\\$]+")}
_QUOTED = {True: re.compile(r'[^"\\$`]+'), False: re.compile(r'[^"\\$]+')}


def _scan(text: str, i: int, shell: bool, nested: bool) -> tuple[list[str], int]:
    out: list[str] = []
    token: str | None = None

    def add(ch: str) -> None:
        nonlocal token
        token = (token or "") + ch

    def close() -> None:
        nonlocal token
        if token is not None:
            out.append(token)
            token = None

    escapes_in_quotes = '"\\$`' if shell else '"\\$'
    plain, quoted = _PLAIN[shell], _QUOTED[shell]
    while i < len(text):
        c = text[i]
        if shell and text.startswith("$(", i):
            inner, i = _scan(text, i + 2, shell, nested=True)
            add(MARK + "$(" + "\x02".join(inner) + ")")
        elif nested and c == ")":
            close()
            return out, i
        elif c in " \t":
            close()
        elif shell and c in ";&|()<>":
            close()
            out.append(MARK + c)
        elif c == "'":
            end = text.index("'", i + 1)
            add(text[i + 1:end])
            i = end
        elif c == '"':
            i += 1
            add("")
            while text[i] != '"':
                if shell and text.startswith("$(", i):
                    inner, i = _scan(text, i + 2, shell, nested=True)
                    add(MARK + "$(" + "\x02".join(inner) + ")")
                elif text[i] == "\\" and text[i + 1] in escapes_in_quotes:
                    add(text[i + 1])
                    i += 1
                elif text[i] == "$" or (shell and text[i] == "`"):
                    add(MARK + text[i])
                else:
                    run = quoted.match(text, i)
                    add(run.group() if run else text[i])
                    i = run.end() - 1 if run else i
                i += 1
        elif c == "\\":
            add(text[i + 1])
            i += 1
        elif c == "$" or (shell and c in "`*?[{}~"):
            add(MARK + c)
        else:
            run = plain.match(text, i)
            add(run.group() if run else c)
            i = run.end() - 1 if run else i
        i += 1
    assert not nested, f"an unclosed $( in {text!r}"
    close()
    return out, i


def parsed(text: str) -> list[tuple[str, list[str]]]:
    result = []
    for line in instructions(text):
        keyword, _, rest = line.partition(" ")
        result.append((keyword.upper(), words(rest, shell=keyword.upper() == "RUN")))
    return result


# ---------------------------------------------------------------- the data, poisoned field by field

MATRIX = load_matrix(ROOT / "matrix.yaml")


def _stack(name: str):
    st_ = MATRIX.stacks[name]
    return dataclasses.replace(st_, nnal=True) if MATRIX.cann[st_.cann].nnal else st_


def _with_cann(matrix, stack, **changes):
    cann = matrix.cann[stack.cann]
    return dataclasses.replace(matrix, cann={**matrix.cann, stack.cann: dataclasses.replace(cann, **changes)})


def _env(env: CannEnv, poison: Callable[[str], str], what: str) -> CannEnv:
    def var(v: EnvVar) -> EnvVar:
        if what == "value":
            return dataclasses.replace(v, value=tuple(map(poison, v.value)) if isinstance(v.value, tuple)
                                       else poison(v.value))
        return dataclasses.replace(v, name=poison(v.name))
    if what in ("borrowed_from", "source"):
        return dataclasses.replace(env, **{what: poison(getattr(env, what) or "9.0.1")})
    return dataclasses.replace(env, parts=tuple((p, tuple(map(var, vs))) for p, vs in env.parts))


@dataclasses.dataclass(frozen=True)
class Field:
    """One data field a template reads, and how to put a value in it."""
    name: str
    render: Callable[[Callable[[str], str]], str]     # poison -> the rendered text
    env_text: bool = False      # a CANN environment value: Dockerfile ENV text, where ${NAME} expands by design
    # A name the renderer refuses unless it is one: what may follow the sentinel in it (an
    # OS's name in a cache mount's id; an environment variable's name, [A-Za-z_][A-Za-z0-9_]*).
    ident: str = ""
    one_part: bool = False      # a path whose last part the template writes: the value holds no "/"


def _runtime(stack_name: str, os_name: str, part: str) -> Callable[[Callable[[str], str]], str]:
    def run(poison: Callable[[str], str]) -> str:
        matrix, stack, os = MATRIX, _stack(stack_name), MATRIX.os[os_name]
        cann = matrix.cann[stack.cann]
        if part.startswith("os."):
            os = dataclasses.replace(os, **{part[3:]: poison(getattr(os, part[3:]))})
        elif part in ("cann.version", "cann.driver"):
            key = part[5:]
            matrix = _with_cann(matrix, stack, **{key: poison(getattr(cann, key) or "24.1.RC3")})
        elif part == "cann.kernels":
            matrix = _with_cann(matrix, stack, kernels={poison(k): v for k, v in cann.kernels.items()})
            matrix = dataclasses.replace(matrix, defaults=dataclasses.replace(matrix.defaults, chip="none"))
        elif part.startswith("env."):
            matrix = _with_cann(matrix, stack, env=_env(cann.env, poison, part[4:]))
        elif part.startswith("stack."):
            attr = part[6:]
            if attr == "torch.version":
                stack = dataclasses.replace(stack, torch=dataclasses.replace(stack.torch, version=poison(
                    stack.torch.version)))
            else:
                stack = dataclasses.replace(stack, **{attr: poison(getattr(stack, attr))})
        elif part.startswith("python."):
            default = stack.python_for(os)
            source = matrix.pythons[default]
            attr = part[7:]
            value = tuple(map(poison, source.urls)) if attr == "urls" else poison(getattr(source, attr) or "0" * 64)
            matrix = dataclasses.replace(matrix, pythons={**matrix.pythons, default: dataclasses.replace(
                source, **{attr: value})})
        return render.runtime_dockerfile(matrix, stack, os).text
    return run


def _builder(stack_name: str, builder: str, part: str) -> Callable[[Callable[[str], str]], str]:
    def run(poison: Callable[[str], str]) -> str:
        stack, b = MATRIX.stacks[stack_name], MATRIX.builders[builder]
        torch = stack.torch
        if part.startswith("builder."):
            b = dataclasses.replace(b, **{part[8:]: poison(getattr(b, part[8:]))})
        elif part == "stack.name":
            stack = dataclasses.replace(stack, name=poison(stack.name))
        elif part == "torch.version":
            torch = dataclasses.replace(torch, version=poison(torch.version))
            stack = dataclasses.replace(stack, torch=torch)
        elif part == "torch.index":
            torch = dataclasses.replace(torch, index={a: poison(u) for a, u in
                                                      {"x86_64": "https://x.example/whl", **torch.index}.items()})
        elif part == "stack.pins":
            stack = dataclasses.replace(stack, pins={**stack.pins, "numpy": poison("<2")})
        return render.builder_dockerfile(MATRIX, stack, torch, b).text
    return run


def _per_os(module, os_name: str, attr: str) -> Callable[[Callable[[str], str]], str]:
    def run(poison: Callable[[str], str]) -> str:
        os = dataclasses.replace(MATRIX.os[os_name], **{attr: poison(getattr(MATRIX.os[os_name], attr))})
        matrix = dataclasses.replace(MATRIX, os={os_name: os})
        return module.render(matrix)[0].text
    return run


# A torch stack with NNAL and SiP and a borrowed environment, on an OS whose Python is built
# from source; MindSpore's and a CANN-only stack; a manylinux builder with a toolset and a
# Debian one with a cross compiler; the serving and devel images of an OS.
RUNTIMES = [("2.11.0", "debian11"), ("mindspore2.9.0", "ubuntu22.04"), ("cann8.0.RC3", "openeuler22.03")]
OS_NAME_TAIL = r"[A-Za-z0-9._+-]*"
ENV_NAME_TAIL = r"[A-Za-z0-9_]*"
RUNTIME_PARTS = ["os.name", "os.image", "os.python", "cann.version", "cann.driver", "cann.kernels", "env.value",
                 "env.name", "env.borrowed_from", "env.source", "stack.name", "stack.release", "stack.package",
                 "stack.torch.version", "python.version", "python.sha256", "python.urls"]
FIELDS = [Field(f"runtime {s} {o} {p}", _runtime(s, o, p), env_text=p == "env.value",
                ident={"os.name": OS_NAME_TAIL, "env.name": ENV_NAME_TAIL}.get(p, ""))
          for s, o in RUNTIMES for p in RUNTIME_PARTS if not (p == "stack.torch.version" and not MATRIX.stacks[s].torch)
          and not (p.startswith("python.") and MATRIX.os[o].python in MATRIX.stacks[s].pythons())]
BUILDER_PARTS = ["builder.name", "builder.image", "builder.python", "builder.toolset", "builder.cross", "stack.name",
                 "torch.version", "torch.index", "stack.pins"]
FIELDS += [Field(f"builder {s} {b} {p}", _builder(s, b, p), one_part=p == "builder.toolset")
           for s, b in (("2.11.0", "manylinux_2_28"), ("2.1.0", "debian11"))
           for p in BUILDER_PARTS
           if not (p == "builder.toolset" and not MATRIX.builders[b].toolset)
           and not (p == "builder.cross" and not MATRIX.builders[b].cross)]
FIELDS += [Field(f"{m.__name__} {o} os.{a}", _per_os(m, o, a), ident=OS_NAME_TAIL if a == "name" else "")
           for m in (serving, devel) for o in ("debian12", "openeuler24.03") for a in ("name", "image", "python")]


def _merged(found: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """Consecutive ENV instructions as one."""
    out: list[tuple[str, list[str]]] = []
    for keyword, ws in found:
        if out and keyword == "ENV" and out[-1][0] == "ENV":
            out[-1] = ("ENV", out[-1][1] + ws)
        else:
            out.append((keyword, list(ws)))
    return out


@functools.lru_cache(maxsize=None)
def _baseline(field: Field) -> str:
    return field.render(lambda v: v + SENTINEL)


def _check(field: Field, hostile: str) -> None:
    """Render the field with the sentinel and with the hostile value: the same instructions
    and words, the hostile value where the sentinel was, or a refusal it explains."""
    hostile = hostile.replace("/", "_") if field.one_part else hostile
    baseline = _baseline(field)
    try:
        text = field.render(lambda v: v + hostile)
    except UserError as exc:
        ident_refused = bool(field.ident) and not re.fullmatch(field.ident, hostile)
        assert CONTROL.search(hostile) or ident_refused, (field.name, hostile, str(exc))
        return
    assert text.count("\n") == baseline.count("\n"), (field.name, hostile)
    literal = hostile.replace("$", MARK + "$") if field.env_text else hostile
    want = [(k, [w.replace(SENTINEL, literal) for w in ws]) for k, ws in parsed(baseline)]
    got = parsed(text)
    if field.env_text:      # a value naming a variable set beside it starts an ENV of its own (DL3044)
        want, got = _merged(want), _merged(got)
    assert [k for k, _ in got] == [k for k, _ in want], (field.name, hostile)
    for (keyword, theirs), (_, ours) in zip(got, want):
        assert theirs == ours, (field.name, hostile, keyword, theirs, ours)


def test_the_lexer_sees_an_injection():
    """The reading above is not blind: the issue's value written as it was before the fix
    (cannenv's bare quotes) makes a RUN of its own, and a shell value unquoted a command."""
    value = '/x"\nRUN touch /pwned\nENV ZZ="b'
    assert [k for k, _ in parsed(f'FROM x\nENV A="{value}"\n')] == ["FROM", "ENV", "RUN", "ENV"]
    assert parsed('RUN pkg="/tmp/$(id)"; echo a')[0][1] == [f"pkg=/tmp/{MARK}$(id)", MARK + ";", "echo", "a"]
    assert parsed("LABEL a=\"x\\\" b=\\\"y\"")[0][1] == ['a=x" b="y']


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_the_issue_payload_stays_data(field):
    for payload in PAYLOADS:
        _check(field, payload)


def test_a_name_is_refused_for_what_its_own_kind_of_name_cannot_hold():
    """An OS's name may hold "." and "-", an environment variable's may not: a "." after a
    CANN variable's name is refused with its reason (the fuzz once drew it), an "_" kept."""
    env_names = [f for f in FIELDS if f.name.endswith(" env.name")]
    os_names = [f for f in FIELDS if f.name.endswith(" os.name")]
    assert env_names and os_names
    for hostile in (".", "-", "+"):
        _check(env_names[0], hostile)
        _check(os_names[0], hostile)
    _check(env_names[0], "_X")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FIELDS), HOSTILE)
def test_no_hostile_value_becomes_an_instruction_or_a_command(field, hostile):
    _check(field, hostile)


# What the render functions hand the templates besides records, each with where it comes
# from: a field FIELDS poisons, or the code's own (a constant, a choice it makes, the
# stack's own Pythons that a builder's list is filtered by).
PASSED = {
    "label_prefix": "code", "framework_template": "code", "default_python_from": "code", "set_env": "code",
    "kernels_word": "code", "chip_family": "code", "installer_logs": "code", "nnal": "code", "nnal_abi": "code",
    "packages": "code", "tools": "code", "stack": "records", "os": "records", "cann": "records", "flavor": "records",
    "runtime_os": "records", "gcc": "an int (schema: 4 to 20)", "cc": "gcc", "cxx": "gcc",
    "toolkit_file": "cann.version", "kernels_file": "cann.version", "nnal_file": "cann.version",
    "own_kernels": "cann.version, cann.kernels",     # a chip its record names: a record's name only
    "era_note": "cann.version", "default_chip": "cann.kernels", "toolkit_env": "env.value, env.name",
    "nnal_env": "env.value, env.name", "env_source": "env.source", "env_from": "env.borrowed_from",
    "source_python": "python.version, python.sha256, python.urls", "default_base": "builder.image",
    "toolset": "builder.toolset", "path_prefix": "builder.toolset", "cross": "builder.cross",
    "torch_index": "torch.index", "build_requirements": "stack.pins",
    "pythons": "filtered", "toolchain_words": "filtered", "native_words": "filtered",
}


def test_every_field_the_templates_read_is_poisoned(monkeypatch):
    """Every string attribute a template reads from a data record is one FIELDS poisons (or
    is checked against a closed list, or a constant of the code), and every value the
    render functions hand a template is in PASSED: a template that starts reading a new
    field, or a render function that passes a new value, fails here until it is added."""
    read: set[tuple[str, str]] = set()
    passed: set[str] = set()
    env = render._env()
    plain, plain_render = jinja2.Environment.getattr, jinja2.Template.render

    def tracked(self, obj, attribute):
        value = plain(self, obj, attribute)
        if isinstance(value, str) and dataclasses.is_dataclass(obj):
            read.add((type(obj).__name__, attribute))
        return value

    def rendering(self, *args, **kwargs):
        passed.update(kwargs)
        return plain_render(self, *args, **kwargs)
    monkeypatch.setattr(env, "getattr", tracked.__get__(env))
    monkeypatch.setattr(jinja2.Template, "render", rendering)
    for field in FIELDS:
        field.render(lambda v: v)
    assert passed - set(PASSED) == set(), "a value handed to a template that PASSED does not account for"
    poisoned_parts = {p for f in FIELDS for p in RUNTIME_PARTS + BUILDER_PARTS if f.name.endswith(" " + p)}
    for name, source in PASSED.items():
        for part in source.split(", "):
            assert part in ("code", "records", "gcc", "filtered", "an int (schema: 4 to 20)") \
                or part in poisoned_parts, (name, part)
    poisoned = {("OSBase", "name"), ("OSBase", "image"), ("OSBase", "python"), ("CannRelease", "version"),
                ("CannRelease", "driver"), ("Stack", "name"), ("Stack", "release"), ("Stack", "package"),
                ("TorchParts", "version"), ("Builder", "name"), ("Builder", "python")}
    # one_of-checked words (apt/dnf, manylinux/apt) and the project's own constants (Packages)
    closed = {("OSBase", "family"), ("Builder", "family"), ("Packages", "os"), ("Packages", "python"),
              ("Packages", "cache")}
    derived = {("Stack", "title")}      # the release and package, both poisoned
    assert read - poisoned - closed - derived == set(), "a field the templates read that no test poisons"
    assert poisoned <= read, "a poisoned field no template reads any more: take it out of the list"
