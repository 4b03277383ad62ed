"""bubblewrap's mount arguments, each mount's missing parent folders made first."""
import os
from collections.abc import Iterable
from pathlib import Path


def ancestors(path: str) -> list[str]:
    """Every folder above `path` but the root: /a/b/c -> /a, /a/b."""
    parts = Path(path).parts
    return [str(Path(*parts[:i])) for i in range(2, len(parts))]


class Mounts(list[str]):
    """bubblewrap's arguments; `mount` makes a target's missing parents (empty, 0755) but those in
    `existing` (the host's links into /usr)."""

    def __init__(self, args: Iterable[str], existing: Iterable[str] = ()) -> None:
        super().__init__(args)
        self.existing = frozenset(existing)
        self.made: set[str] = set()

    def mount(self, flag: str, source: str | os.PathLike[str], target: str | os.PathLike[str] | None = None) -> None:
        target = str(target or source)
        for ancestor in ancestors(target):
            if ancestor not in self.made and ancestor not in self.existing:
                self.extend(["--perms", "0755", "--dir", ancestor])
                self.made.add(ancestor)
        self.extend([flag, str(source), target])
        self.made.add(target)
