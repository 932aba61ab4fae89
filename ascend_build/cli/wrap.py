"""Errors into messages and exit codes, the one way every task ends: a UserError prints
`error: ...` and exits with its class's code (errors.EXIT_CODES); Ctrl-C `interrupted:`
and 130, whichever process saw it first; a path the system refuses is bad input; never
a traceback. The output level a task was given (--quiet, --verbose) is set first, then the
site's settings from invoke's config fill the options the command line left out (the ones
its record declares site=True). And a task made from the record its action receives (`task`):
its signature, help and record."""
from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any, Callable

from invoke import Exit

from .. import console, project
from ..engine import interrupts
from ..errors import CODE, UserError
from . import siteconfig
from .options import flags, record_of, signature
from .program import localize


def user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        console.configure(console.level_of(bool(kwargs.get("quiet")), bool(kwargs.get("verbose"))))
        interrupts.install()
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt as exc:
            print(interrupts.report(exc), file=sys.stderr)
            raise Exit(code=interrupts.Interrupted.exit_code) from None
        except UserError as exc:
            if interrupts.received():       # a step that failed because it was interrupted
                print(interrupts.report(exc), file=sys.stderr)
                raise Exit(code=interrupts.Interrupted.exit_code) from None
            console.error(_bounded(localize(str(exc))))
            raise Exit(code=exc.exit_code) from None
        except OSError as exc:
            # A path given on the command line the system refuses (too long, no permission, ...).
            name = str(exc.filename) if exc.filename else ""
            where = f"{name[:200]}{'...' if len(name) > 200 else ''}: " if name else ""
            console.error(f"{where}{exc.strerror or exc}")
            raise Exit(code=CODE[2].code) from None
        finally:
            interrupts.uninstall()
            console.configure("normal")
    return wrapper


LINE = 1000       # an error's line at most this long: a huge value given is said in part, never echoed whole


def _bounded(text: str) -> str:
    return "\n".join(line if len(line) <= LINE else f"{line[:LINE]}... ({len(line)} characters)"
                     for line in text.split("\n"))


def exit_with(code: int) -> None:
    """End the task with this code (a subprocess's, or 1 for news and blocking checks)."""
    if code:
        raise Exit(code=code)


def task(record: type, *, without: tuple[str, ...] = (), help: dict[str, str] | None = None,
         **opts: Any) -> Callable[[Callable[..., Any]], Any]:
    """invoke's @task for a task whose options are a record's (cli/options.py): the body
    `fn(c, o)` gets the record; invoke sees a signature of one keyword per option, their help
    and which repeat, all read from the record. `without`: options of the record this task
    has not (they keep their defaults); `help`: this task's own words for some of them. The
    task ends the way every task does (user_errors). The help stays on the task
    (`option_help`): invoke hands it to its parser once (and drops it), the tasks page reads
    it again."""
    from invoke import task as invoke_task

    def decorate(fn: Callable[..., Any]) -> Any:
        declared = [x for x in flags(record) if x.name not in without]
        told = {x.name: x.help for x in declared}
        strays = sorted(set(without) - {x.name for x in flags(record)}) + sorted(set(help or {}) - set(told))
        if strays:
            raise TypeError(f"task {fn.__name__}: {', '.join(strays)}: not an option of {record.__name__}")
        told.update(help or {})

        takes = [x.name for x in declared if x.site]

        @functools.wraps(fn)
        def body(c: Any, **given: Any) -> Any:
            if hasattr(c, "config"):       # the task's invoke Context: the site's settings, every task's
                known = siteconfig.settings(fn.__globals__)     # the tasks beside this one (tasks.py's)
                given = siteconfig.apply(takes, c.config, known, dict(given), sys.argv[1:])
            # One project: the checkout of the tasks.py invoke loaded, or the one --matrix names.
            tasks = Path(fn.__globals__.get("__file__") or ".").absolute().parent
            if isinstance(given.get("matrix"), str):
                given["matrix"] = project.matrix_file(given["matrix"], tasks)
            with project.working_in(project.checkout_for(given.get("matrix"), tasks)):
                return fn(c, record_of(record, given, without))
        body.__signature__ = signature(record, without)      # type: ignore[attr-defined]
        made = invoke_task(auto_shortflags=False, help=dict(told), iterable=[x.name for x in declared if x.iterable],
                           **opts)(user_errors(body))
        made.option_help, made.record, made.without = told, record, without
        return made
    return decorate


def pipe_ends_quietly() -> None:
    """A reader of the output that went away (`invoke matrix | head`) ends the command quietly,
    as it does any Unix tool (SIGPIPE: 141 in the shell), never with a traceback. (The rest of
    how a command line ends before a task runs is ascend-build's: cli/entry.py.)"""
    import signal
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
