"""Write RGB frames to an mp4 file, atomically: the file appears only once it is complete."""

from __future__ import annotations

import os
from pathlib import Path


class VideoWriter:
    def __init__(self, path: str | os.PathLike, fps: int = 15):
        # 15 fps: Atari runs at 60 frames per second and the agent sees every 4th one
        import imageio

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp_path = self.path.with_name(f".{self.path.stem}.tmp{self.path.suffix}")
        # macro_block_size=2: Atari frames (210x160) are even-sized already, no rescaling needed
        self.writer = imageio.get_writer(
            self.tmp_path, fps=fps, codec="libx264", macro_block_size=2, ffmpeg_log_level="error"
        )

    def append(self, frame) -> None:
        self.writer.append_data(frame)

    def close(self) -> Path:
        self.writer.close()
        os.replace(self.tmp_path, self.path)
        return self.path

    def discard(self) -> None:
        """Stop writing and delete what was written: no file appears."""
        self.writer.close()
        self.tmp_path.unlink(missing_ok=True)
