"""Write RGB frames to an mp4 file, atomically: the file appears only once it is complete.

The frames go through a pipe to an ffmpeg process (imageio-ffmpeg's binary), in a process group
of its own so that a Ctrl-C at the terminal reaches this process and not ffmpeg mid-file. imageio
starts it with subprocess and `preexec_fn=os.setpgrp`, which makes subprocess fork the whole
process and run Python code in the child; in a process that runs threads (JAX's, EnvPool's) that
can deadlock, and JAX warns of it ("os.fork() was called ... will likely lead to a deadlock").
Here `os.posix_spawn(..., setpgroup=0)` starts it: no Python code runs between the fork and
ffmpeg.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path

import numpy as np

from cleanrl_utils.checks.paths import folder_problem

VIDEOS = Path("videos")  # a training run's evaluation videos: videos/{run_name}/ (working folder)
# the causes of a failed write that ffmpeg names by their `strerror`: the file's disk, which the
# run says as it says its own folder's (`OSError`), not as a bug of the video's
WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EACCES, errno.EFBIG)


def run_videos(run_name: str) -> Path:
    """Where a training run's evaluation games are recorded (`--capture-video`, `--upload-model`)."""
    return VIDEOS / run_name


def run_videos_problem(args, run_name: str) -> str | None:
    """Why the evaluation videos of a run (with `--capture-video` or `--upload-model`) could not
    be written under `run_videos(run_name)` (`videos` a file, or not writable), or None; asked
    before any work, since they are written only after training."""
    if not (getattr(args, "capture_video", False) or getattr(args, "upload_model", False)):
        return None
    folder = run_videos(run_name)
    if (problem := folder_problem(folder)) is None:
        return None
    flag = "--capture-video" if getattr(args, "capture_video", False) else "--upload-model"
    return f"{flag}: cannot write the evaluation's videos in {folder}/: {problem}"


def ffmpeg_exe() -> str:
    """The ffmpeg program, found without running anything: `IMAGEIO_FFMPEG_EXE`, else the binary
    that imageio-ffmpeg ships, else `ffmpeg` on the PATH."""
    exe = os.environ.get("IMAGEIO_FFMPEG_EXE")
    if exe:
        return exe
    import imageio_ffmpeg  # (a missing `video` extra is named by cleanrl_utils.console.extras)

    binaries = Path(imageio_ffmpeg.__file__).parent / "binaries"
    shipped = sorted(p for p in binaries.glob("ffmpeg*") if p.is_file() and os.access(p, os.X_OK))
    if shipped:
        return str(shipped[-1])
    exe = shutil.which("ffmpeg")
    if exe is None:
        raise RuntimeError(
            "no ffmpeg: imageio-ffmpeg ships none for this platform and none is on the PATH"
        )
    return exe


class VideoWriter:
    def __init__(self, path: str | os.PathLike, fps: int = 15):
        # 15 fps: Atari runs at 60 frames per second and the agent sees every 4th one
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp_path = self.path.with_name(f".{self.path.stem}.tmp{self.path.suffix}")
        self.fps = fps
        self.pid: int | None = None  # ffmpeg, started at the first frame (which gives the size)
        self.popen: subprocess.Popen | None = None  # (where there is no posix_spawn)
        self.pipe = None
        self.said = bytearray()  # ffmpeg's stderr, read by a thread of its own (`_read_said`)
        self.reader: threading.Thread | None = None

    def append(self, frame) -> None:
        frame = np.ascontiguousarray(frame, dtype=np.uint8)
        if self.pipe is None:
            self._start(frame.shape[1], frame.shape[0])
        try:
            self.pipe.write(frame.tobytes())
        except BrokenPipeError:  # ffmpeg stopped (a full disk): its exit code and words say why
            raise self._failure(self._wait()) from None

    def _start(self, width: int, height: int) -> None:
        exe = ffmpeg_exe()
        command = [
            exe, "-y", "-loglevel", "error",
            "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{width}x{height}", "-r", str(self.fps),
            "-i", "-", "-an",
            # H.264 in yuv420p (what players accept) needs even sides: Atari's 210x160 are
            "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2",
            "-vcodec", "libx264", "-pix_fmt", "yuv420p", "-crf", "25",
            "-f", "mp4", str(self.tmp_path),
        ]  # fmt: skip
        if not hasattr(os, "posix_spawn"):  # Windows
            self.popen = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
            self.pipe = self.popen.stdin
            self._read_said(self.popen.stderr.fileno())
            return
        read_end, write_end = os.pipe()  # (both close on exec; dup2 makes the copy on 0 stay)
        said_read, said_write = os.pipe()
        try:
            # setpgroup=0: its own process group, so a Ctrl-C at the terminal stops this process,
            # which closes the video, and not ffmpeg in the middle of it
            self.pid = os.posix_spawn(
                exe, command, os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read_end, 0), (os.POSIX_SPAWN_DUP2, said_write, 2)
                ],
                setpgroup=0,
            )  # fmt: skip
        except BaseException:
            os.close(write_end)
            os.close(said_read)
            raise
        finally:
            os.close(read_end)
            os.close(said_write)
        self.pipe = os.fdopen(write_end, "wb")
        self._read_said(said_read, close=True)

    def _read_said(self, fd: int, close: bool = False) -> None:
        """Keeps what ffmpeg says (its errors: `-loglevel error`), read as it comes so that it
        never blocks on a full pipe; the last 64 KiB."""

        def read() -> None:
            try:
                while chunk := os.read(fd, 65536):
                    self.said += chunk
                    del self.said[:-65536]
            finally:
                if close:
                    os.close(fd)

        self.reader = threading.Thread(target=read, name="ffmpeg-stderr", daemon=True)
        self.reader.start()

    def _failure(self, code: int) -> Exception:
        """ffmpeg's failure with exit code `code`: an `OSError` of the cause it names when that
        is a write's (a full disk: `No space left on device`), else a `RuntimeError` with its
        last line."""
        self.tmp_path.unlink(missing_ok=True)
        if self.reader is not None:
            self.reader.join(timeout=5.0)
        said = self.said.decode(errors="replace")
        for cause in WRITE_ERRORS:
            if os.strerror(cause) in said:
                return OSError(cause, os.strerror(cause), str(self.path))
        last = said.strip().splitlines()[-1:] or ["nothing said"]
        return RuntimeError(f"ffmpeg failed (exit code {code}) writing {self.path}: {last[0]}")

    def _wait(self) -> int:
        """Closes ffmpeg's input and waits for it to finish the file; its exit code."""
        if self.pipe is not None:
            try:
                self.pipe.close()
            except BrokenPipeError:  # ffmpeg already stopped: its exit code says why
                pass
        if self.popen is not None:
            return self.popen.wait()
        if self.pid is None:
            return 0
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        return os.waitstatus_to_exitcode(status)

    def close(self) -> Path:
        if self.pipe is None:
            raise RuntimeError(f"no frame written to {self.path}")
        code = self._wait()
        if code != 0:
            raise self._failure(code)
        os.replace(self.tmp_path, self.path)
        return self.path

    def discard(self) -> None:
        """Stop writing and delete what was written: no file appears."""
        if self.pid is not None:
            os.kill(self.pid, signal.SIGTERM)
        elif self.popen is not None:
            self.popen.terminate()
        self._wait()
        self.tmp_path.unlink(missing_ok=True)
