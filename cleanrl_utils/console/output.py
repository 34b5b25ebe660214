"""What a process says on stdout and stderr, written so that losing them never loses the process.

A run's output goes where the researcher sent it: a terminal that an ssh session takes with it
(writes then fail with EIO), a `| tee log` that the terminal's Ctrl-C ends before the run has
said it is stopping (EPIPE), a `| head` that has read enough, a log on a full disk (ENOSPC), a
stream closed with `2>&-`. A write that fails there raised where it was made (in a signal
handler, at the "logging to" line), and the run died without its checkpoint. Here a failed write
loses the stream, never the process:

- `SafeStream`: a text stream whose `write` and `flush` never raise. Its first failure loses it:
  what is written to it is dropped from then on (a lost stderr's lines go to stdout, when that
  still works: the errors and the stops are said where they can be).
- `guard()`: `sys.stdout` and `sys.stderr` as `SafeStream`s for the life of the process, so that
  every `print` (a library's, a tool's) is safe. A standard stream that is lost is also noted once
  on the other one, remembered (`lost()`: a run records it in its config.json, so that its files
  say what happened), and its file descriptor pointed at os.devnull: C code and the interpreter's
  last flush then write nowhere instead of failing again, and a stream that shares its file (`2>&1`,
  one terminal) is lost with it. A standard descriptor closed when the process starts gets
  os.devnull too, so that no file the process opens takes its number and receives its messages.
  A script run as a program calls it from its first import (`cleanrl_utils.entry`), as do
  `python -m cleanrl_utils.torchrun` and the other `python -m` tools (their `__main__`).
- `say(line)`: one line on stderr (or stdout), flushed at once, through a `SafeStream`: every
  message of a run's stop path and of its progress bar, inside signal handlers too (a write that
  interrupts another on the same stream goes to its descriptor directly).

The lowest floor of `cleanrl_utils`: it imports nothing from the package.
"""

from __future__ import annotations

import errno
import os
import sys

STANDARD = {"stdout": 1, "stderr": 2}  # the streams `guard` takes over, and their descriptors
_guarded: dict[str, SafeStream] = {}  # name -> the guard's stream
_lost: dict[str, str] = {}  # name -> why it can no longer be written, for the guard's streams


def cause(exc: OSError) -> str:
    """`no space left on device (ENOSPC)`: an OSError as a reader wants it."""
    name = errno.errorcode.get(exc.errno or 0)
    text = (exc.strerror or str(exc)).rstrip(".")
    text = text[:1].lower() + text[1:]
    return f"{text} ({name})" if name else text


class SafeStream:
    """`stream` (a text stream, or None: closed), whose `write` and `flush` never raise: the
    first OSError (EPIPE, EIO, ENOSPC, EBADF), or a stream closed or missing, loses it (`lost`
    says why), and what is written from then on is dropped, or goes to `fallback` when that is
    set and not lost itself. Everything else is the wrapped stream's."""

    def __init__(self, stream, name: str, fd: int | None = None):
        """`fd`: the standard descriptor the stream writes to (`guard`'s streams only), pointed
        at os.devnull when the stream is lost."""
        self.stream, self.name, self.fd = stream, name, fd
        self.lost: str | None = None if stream is not None else "closed"
        self.fallback: SafeStream | None = None

    def write(self, text: str) -> int:
        if self.lost is None:
            try:
                return self.stream.write(text)
            except RuntimeError:  # (a signal handler's write inside this thread's on the stream)
                self._write_fd(text)
                return len(text)
            except (OSError, ValueError, AttributeError) as exc:  # (ValueError: a closed file)
                self.lose(exc)
        if self.fallback is not None and self.fallback.lost is None:
            self.fallback.write(text)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.lost is None:
            try:
                self.stream.flush()
            except RuntimeError:
                pass
            except (OSError, ValueError, AttributeError) as exc:
                self.lose(exc)
        elif self.fallback is not None:
            self.fallback.flush()

    def isatty(self) -> bool:
        try:
            return self.lost is None and self.stream.isatty()
        except (OSError, ValueError, AttributeError):
            return False

    @property
    def closed(self) -> bool:
        return self.stream is None or bool(getattr(self.stream, "closed", False))

    def __getattr__(self, name: str):
        if name == "stream":  # (not set yet: no recursion)
            raise AttributeError(name)
        return getattr(self.stream, name)

    def _write_fd(self, text: str) -> None:
        try:
            os.write(self.stream.fileno(), text.encode(errors="replace"))
        except (OSError, ValueError, AttributeError) as exc:
            self.lose(exc)

    def lose(self, exc: BaseException | str) -> None:
        """The stream can no longer be written (`exc`: the error, or why in words); a guard's
        stream takes with it those that write to the same file (`2>&1`, one terminal)."""
        if self.lost is not None:
            return
        self.lost = exc if isinstance(exc, str) else why(exc)
        if self.fd is None:
            return
        same = [
            s
            for s in _guarded.values()
            if s is not self and s.lost is None and _same_file(s.fd, self.fd)
        ]
        for stream in (self, *same):
            stream.lost = self.lost
            _lost.setdefault(stream.name, self.lost)
            _to_devnull(stream.fd)
        self._note()

    def _note(self) -> None:
        """Says on the guard's other streams that this one is lost (once: when it is lost)."""
        note = f"warning: {self.name} can no longer be written ({self.lost}): {_then(self)}\n"
        for other in _guarded.values():
            if other is not self and other.lost is None:
                other.write(note)
                other.flush()


def _then(stream: SafeStream) -> str:
    if stream.fallback is not None and stream.fallback.lost is None:
        return f"what goes there comes to {stream.fallback.name} from now on"
    return "what goes there is dropped from now on; the process goes on"


def why(exc: BaseException) -> str:
    """Why a write failed, in words."""
    if isinstance(exc, OSError) and exc.errno:
        return cause(exc)
    return "closed"


def _same_file(fd: int | None, other: int | None) -> bool:
    try:
        a, b = os.fstat(fd), os.fstat(other)
    except (OSError, TypeError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _to_devnull(fd: int | None) -> None:
    if fd is None:
        return
    try:
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
    except OSError:  # (no descriptor left: the stream stays as it is, and lost)
        pass


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def guard() -> None:
    """`sys.stdout` and `sys.stderr` as `SafeStream`s for the life of the process, their losses
    noted, remembered and pointed at os.devnull; a standard descriptor closed at the start given
    os.devnull (its stream lost from the start). A second call changes nothing."""
    if _guarded:
        return
    if not _is_open(0):
        _to_devnull(0)
    closed = [name for name, fd in STANDARD.items() if not _is_open(fd)]
    for name, fd in STANDARD.items():
        if name in closed:
            _to_devnull(fd)
        _guarded[name] = SafeStream(None if name in closed else getattr(sys, name), name, fd)
    _guarded["stderr"].fallback = _guarded["stdout"]  # (errors and stops, said where they can be)
    for name in closed:  # (os.devnull now: not linked to another stream sent there)
        _guarded[name].lost = _lost[name] = f"closed at the start ({errno.errorcode[errno.EBADF]})"
        _guarded[name]._note()
    sys.stdout, sys.stderr = _guarded["stdout"], _guarded["stderr"]


def move_stderr(fd: int) -> None:
    """This process's own stderr is written to `fd` from now on (`torchrun` gives descriptor 2 to
    the pipe of its processes' output); a stderr already lost stays lost."""
    stream = _guarded["stderr"]
    if stream.lost is None:
        stream.stream = open(fd, "w", buffering=1, closefd=False)  # noqa: SIM115 (the process's)
    stream.fd = fd


def stream(name: str) -> SafeStream:
    """The guard's `sys.stdout` or `sys.stderr` (`name`), or, where the process has no guard
    (a notebook, a test), the current one as a `SafeStream` (stderr's falling back to stdout, as
    `print` does for a stderr that is None)."""
    current = getattr(sys, name)
    if isinstance(current, SafeStream):
        return current
    safe = SafeStream(current, name)
    if name == "stderr":
        safe.fallback = stream("stdout")
    return safe


def safe(file, name: str) -> SafeStream:
    """`file` as a `SafeStream` (itself when it is one)."""
    return file if isinstance(file, SafeStream) else SafeStream(file, name)


def say(line: str, stdout: bool = False) -> None:
    """`line` on stderr (or stdout) on a line of its own, flushed at once; never raises."""
    out = stream("stdout" if stdout else "stderr")
    out.write(f"{line}\n")
    out.flush()


def flush() -> None:
    """Flushes stdout and stderr; never raises."""
    for name in STANDARD:
        stream(name).flush()


def lost() -> dict[str, str]:
    """The standard streams lost since `guard()` and why (`{"stdout": "broken pipe (EPIPE)"}`)."""
    return dict(_lost)
