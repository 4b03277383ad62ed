"""Bounded per-process caches: what a process keeps of rows or of work it would otherwise redo
per call. Each is a cache, never the only copy; what validates an entry is its caller's key."""
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic

from typing_extensions import TypeVar

V = TypeVar("V", default=Any)  # what a cache made without naming it keeps


class LruCache(Generic[V]):
    """The `size` entries stored or used most recently, safe to share between the ORM's threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        """The entry under `key`, made by `make()` and kept when there is none (a race makes it twice)."""
        value = self.get(key)
        return self.put(key, make()) if value is None else value

    def put(self, key: Hashable, value: V) -> V:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value
