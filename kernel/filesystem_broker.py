"""The embedded Celery broker: kombu's filesystem transport, with each message file written under
a name the worker does not take and renamed into the queue once whole. kombu's own writes the
file in place, so a worker listing the folder meanwhile moved it away half written and died on a
JSONDecodeError."""
import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

PARTIAL = ".partial"  # _get takes only names ending in ".<queue>.msg"


class Channel(filesystem.Channel):
    # kombu-stubs name the base class's argument `message` and filesystem's `payload`: no name fits both.
    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]
        name = os.path.join(self.data_folder_out, f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg")
        try:
            with open(name + PARTIAL, "wb") as partial:
                partial.write(str_to_bytes(dumps(payload)))
            os.replace(name + PARTIAL, name)  # atomic: the worker sees the whole message or none
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
