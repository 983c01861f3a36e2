"""The job's rendezvous store, the one channel every rank's results travel through to rank 0.

Under torchrun the elastic agent hosts a ``TCPStore`` at ``MASTER_ADDR:MASTER_PORT``
(``TORCHELASTIC_USE_AGENT_STORE=True``) and every rank is a client; launched another way (``env://`` by
hand, a batch system), rank 0 hosts it, as ``init_process_group`` would. The process group of the
collective checks is built on this same store, under its own prefix.

A rank whose ``import torch`` fails has no ``TCPStore``: it speaks the store's wire protocol itself
(``RawStoreClient``, standard library only) to put its static snapshot there, so rank 0 still receives it.
The protocol is torch's (``torch/csrc/distributed/c10d/TCPStoreBackend.hpp``: a validation magic number,
then one byte per query and 64-bit length-prefixed strings); it has been stable across torch 2.x, and the
tests check it against the real server of the torch installed.
"""

from __future__ import annotations

import datetime
import os
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any, Protocol

# TCPStoreBackend.hpp: validationMagicNumber, and QueryType's first members (a uint8 enum).
_VALIDATION_MAGIC = 0x3C85F7CE
_QUERY_VALIDATE = 0
_QUERY_SET = 1
_QUERY_GET = 3
_QUERY_CHECK = 5
_CHECK_READY = 0
# The Python TCPStore client puts every key under "/"; the raw client must name the same keys.
_KEY_ROOT = "/"
# A value read back (a rank's payload) is refused beyond this.
MAX_VALUE_BYTES = 64 * 1024 * 1024


class Store(Protocol):
    """What the cluster check needs of a store: ``set`` and a non-blocking ``check``; ``get`` of a key
    that ``check`` said is there."""

    def set(self, key: str, value: str | bytes) -> None: ...

    def get(self, key: str) -> bytes: ...

    def check(self, keys: list[str]) -> bool: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Rendezvous:
    """Where the job's store is and who this rank is, from the variables torchrun (or ``env://``) sets."""

    host: str
    port: int
    rank: int
    world_size: int
    local_rank: int
    agent_store: bool
    # Keys of one attempt: torchrun restarts the workers (--max-restarts) on the same store.
    prefix: str

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> Rendezvous:
        """Raises ``ValueError`` naming the variable that is missing or malformed."""
        env = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for name in ("RANK", "WORLD_SIZE", "MASTER_PORT"):
            raw = env.get(name)
            if raw is None or not raw.strip().isdigit():
                shown = "not set" if raw is None else f"not a number: {raw[:40]!r}"
                raise ValueError(f"{name} is {shown}")
            values[name] = int(raw)
        local = env.get("LOCAL_RANK", "0")
        host = env.get("MASTER_ADDR", "").strip()
        if not host:
            raise ValueError("MASTER_ADDR is not set")
        if values["WORLD_SIZE"] < 1 or values["RANK"] >= values["WORLD_SIZE"]:
            raise ValueError(f"RANK {values['RANK']} is outside WORLD_SIZE {values['WORLD_SIZE']}")
        restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
        return cls(
            host=host,
            port=values["MASTER_PORT"],
            rank=values["RANK"],
            world_size=values["WORLD_SIZE"],
            local_rank=int(local) if local.isdigit() else 0,
            agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true",
            prefix=f"envcheck/cluster/{restart if restart.isdigit() else 0}",
        )

    def key(self, kind: str, rank: int | None = None) -> str:
        """``envcheck/cluster/<attempt>/<kind>[/<rank>]``."""
        return f"{self.prefix}/{kind}" + ("" if rank is None else f"/{rank}")


def torch_store(rdzv: Rendezvous, timeout: float) -> Any:
    """A ``torch.distributed.TCPStore`` on the job's store (the server itself on rank 0 when no agent
    hosts it). Raises what ``TCPStore`` raises when it cannot connect within ``timeout``."""
    from torch.distributed import TCPStore  # type: ignore[attr-defined]  # re-exported from torch._C

    master = rdzv.rank == 0 and not rdzv.agent_store
    return TCPStore(
        rdzv.host,
        rdzv.port,
        rdzv.world_size if master else None,
        master,
        timeout=datetime.timedelta(seconds=timeout),
        wait_for_workers=False,
    )


class RawStoreClient:
    """A client of torch's ``TCPStore`` server written with the standard library: ``set``, ``check`` and
    ``get``. For a rank whose torch cannot be imported (rank 0 too: it can still gather and report).
    Raises ``OSError`` when the store cannot be reached
    or answers outside the protocol."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:  # the server may not be up yet, as TCPStore's own client retries
            try:
                self._sock = socket.create_connection(
                    (host, port), timeout=max(0.1, deadline - time.monotonic())
                )
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)
        self._sock.settimeout(timeout)
        self._sock.sendall(struct.pack("<BI", _QUERY_VALIDATE, _VALIDATION_MAGIC))

    @staticmethod
    def _string(value: bytes) -> bytes:
        return struct.pack("<Q", len(value)) + value

    def set(self, key: str, value: str | bytes) -> None:
        data = value.encode() if isinstance(value, str) else value
        self._sock.sendall(
            bytes([_QUERY_SET]) + self._string((_KEY_ROOT + key).encode()) + self._string(data)
        )

    def get(self, key: str) -> bytes:
        """The value of a key that ``check`` found (the server would wait for a missing one). Raises
        ``OSError`` for a value over ``MAX_VALUE_BYTES`` or a connection that ends mid-way."""
        self._sock.sendall(bytes([_QUERY_GET]) + self._string((_KEY_ROOT + key).encode()))
        (size,) = struct.unpack("<Q", self._exactly(8))
        if size > MAX_VALUE_BYTES:
            raise OSError(f"the store's value for {key} is {size} bytes, more than {MAX_VALUE_BYTES}")
        return self._exactly(size)

    def _exactly(self, size: int) -> bytes:
        chunks = []
        left = size
        while left:
            chunk = self._sock.recv(min(left, 1 << 20))
            if not chunk:
                raise OSError("the store closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def check(self, keys: list[str]) -> bool:
        """Whether every key is set; also the acknowledgement that every earlier ``set`` was processed
        (the server answers queries in order)."""
        query = bytes([_QUERY_CHECK]) + struct.pack("<Q", len(keys))
        query += b"".join(self._string((_KEY_ROOT + k).encode()) for k in keys)
        self._sock.sendall(query)
        return self._exactly(1)[0] == _CHECK_READY

    def close(self) -> None:
        self._sock.close()
