"""The last accepted intent on disk, so a restarted controller serves the same desired state.

The file is JSON: ``{"generation": N, "saved_at": unix time, "intent": <Intent as protobuf JSON>}``,
written to a temporary file, fsynced and renamed over the old one (a crash leaves the old or the
new state, never half of one). Readable by operators; `mlfc-controller get` shows the same.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import json_format

from mlfc.proto import intent_pb2 as pb


class StateError(OSError):
    """The state file could not be written (the intent is then not accepted)."""


@dataclass(frozen=True)
class SavedState:
    generation: int
    intent: pb.Intent


def save_state(path: Path, generation: int, intent: pb.Intent) -> None:
    doc = {
        "generation": generation,
        "saved_at": time.time(),
        "intent": json_format.MessageToDict(intent, preserving_proto_field_name=True),
    }
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StateError(f"cannot save the intent to {path}: {exc.strerror or exc}") from None


def load_state(path: Path) -> SavedState | None:
    """The saved state; None when there is no file. Raises ValueError for a file that is not one."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
        generation = doc["generation"]
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
            raise ValueError(f"generation {generation!r} is not a non-negative integer")
        intent = json_format.ParseDict(doc["intent"], pb.Intent())
    except (ValueError, KeyError, TypeError, json_format.ParseError) as exc:
        raise ValueError(f"{path}: not a controller state file: {exc}") from None
    return SavedState(generation, intent)
