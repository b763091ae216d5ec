"""One connection layer under the Redis store and queue: requests sent by hand, never retried.

redis-py retries a command after a connection error on its own (redis-py 6+ by default). For
a commit that is wrong: a reply lost after the request went out does not say whether the script
ran, and resending it would turn "created" into "exists". So every request here goes through
:meth:`Link.call`, which takes a connection from redis-py's pool, writes the packed request and
reads the replies itself, and tells the caller which of three things happened:

* the request was never written (no connection, connection refused, a write that failed):
  :class:`~cronwarden.model.errors.StoreUnavailable`, nothing applied;
* it was written and the reply was lost (reset, timeout): :class:`LostReply` (the store turns it
  into :class:`~cronwarden.model.errors.CommitOutcomeUnknown` for a write);
* the server refused before running it (``LOADING``, ``BUSY``, ``READONLY`` after a failover,
  ``MASTERDOWN``, ``CLUSTERDOWN``, ``TRYAGAIN``, ``OOM`` of a script that may write, ``MOVED``
  or ``ASK`` after a slot moved): :class:`~cronwarden.model.errors.StoreUnavailable`, nothing
  applied (``MOVED``/``ASK`` refresh the cluster's slot map first).

On a Redis Cluster the request goes to the master owning the slot of ``route``; every key one
request touches carries the same ``{hash tag}``, so it never spans slots.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cronwarden.model.errors import ConfigurationError, StoreUnavailable
from cronwarden.model.redaction import redact

from .settings import RedisSettings

if TYPE_CHECKING:
    import redis

EXTRA_HINT = "pip install 'cronwarden[redis]'"
#: refusals that mean "not run, resend later"
_NOT_RUN = ("LOADING", "BUSY", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "OOM")


class LostReply(StoreUnavailable):
    """The request was written and its reply was lost: it may have run."""


class ScriptFailed(Exception):
    """A script raised an error reply after it may have written (a server-side fault)."""


class Script:
    """A Lua script sent by ``EVALSHA``; the first request to a node (and one after
    ``NOSCRIPT``: a restarted server) sends the whole text with ``EVAL``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


class Link:
    """A redis-py client (standalone or cluster, per ``settings.cluster``), opened on first use.

    ``on_extra``: called with ``"read"`` for every request beyond the one a caller asked for
    (a script resent after ``NOSCRIPT``, a resend after ``MOVED``), so round trips stay counted.
    """

    def __init__(self, settings: RedisSettings, *, name: str = "cronwarden") -> None:
        self.settings = settings
        self.name = name
        self._lock = threading.Lock()
        self._client: Any = None
        self._loaded: set[tuple[str, str]] = set()  #: (node, sha) known cached
        self.on_extra: Callable[[str], None] = lambda _op: None

    # -- clients -----------------------------------------------------------------------------

    def _redis(self) -> Any:
        try:
            import redis as redis_module
        except ImportError as exc:  # pragma: no cover - the extra is missing
            raise ConfigurationError(f"the Redis provider needs redis-py ({EXTRA_HINT})") from exc
        return redis_module

    def client(self) -> Any:
        """The redis-py client (``redis.Redis`` or ``redis.cluster.RedisCluster``)."""
        with self._lock:
            if self._client is None:
                self._client = self._open()
            return self._client

    def _open(self) -> Any:
        r = self._redis()
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        options: dict[str, Any] = {
            "socket_timeout": self.settings.timeout,
            "socket_connect_timeout": self.settings.timeout,
            "client_name": self.name,
            "retry": Retry(NoBackoff(), 0),
            "health_check_interval": 0,
            "protocol": 2,  # the replies' shapes this adapter reads (lists, not RESP3 maps)
        }
        try:
            if self.settings.cluster:
                from redis.cluster import RedisCluster

                return RedisCluster.from_url(self.settings.url, **options)
            return r.Redis.from_url(self.settings.url, **options)
        except r.RedisError as exc:
            raise StoreUnavailable(self._where(f"cannot connect: {_text(exc)}")) from exc
        except (OSError, ValueError) as exc:
            raise StoreUnavailable(self._where(f"cannot connect: {_text(exc)}")) from exc

    def node(self, route: str | bytes | None) -> tuple[str, redis.Redis]:
        """``(node name, client)`` of the master that owns ``route``'s slot (standalone: the
        one server; ``route`` ``None``: any master)."""
        client = self.client()
        if not self.settings.cluster:
            return "", client
        try:
            if route is None:
                node = client.get_random_node()
            else:
                node = client.get_node_from_key(route, replica=False)
            return node.name, client.get_redis_connection(node)
        except self._redis().RedisError as exc:
            raise StoreUnavailable(self._where(f"no cluster node: {_text(exc)}")) from exc

    def masters(self) -> list[tuple[str, redis.Redis]]:
        """Every master (standalone: the one server)."""
        client = self.client()
        if not self.settings.cluster:
            return [("", client)]
        return [(n.name, client.get_redis_connection(n)) for n in client.get_primaries()]

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- requests ----------------------------------------------------------------------------

    def call(
        self, route: str | bytes | None, commands: Sequence[Sequence[Any]], *, what: str
    ) -> list[Any]:
        """Send ``commands`` pipelined in one write to the node owning ``route``'s slot and read
        every reply. An error reply is returned in its place (a ``redis.ResponseError``), not
        raised; see the module docstring for what is raised."""
        r = self._redis()
        for attempt in (1, 2):
            _name, client = self.node(route)
            replies = self._exchange(client, commands, what)
            jumps = (r.exceptions.MovedError, r.exceptions.AskError)
            moved = [x for x in replies if isinstance(x, jumps)]
            if not moved:
                return replies
            # Not run: the slot lives elsewhere now. Refresh the map and send once more.
            if self.settings.cluster:
                self.client().nodes_manager.initialize()
            if attempt == 1:
                self.on_extra("read")
                continue
            raise StoreUnavailable(self._where(f"{what}: {_text(moved[0])} (slot moving)"))
        raise AssertionError("unreachable")  # pragma: no cover

    def _exchange(self, client: Any, commands: Sequence[Sequence[Any]], what: str) -> list[Any]:
        r = self._redis()
        pool = client.connection_pool
        try:
            connection = pool.get_connection()
        except (r.RedisError, OSError) as exc:
            raise StoreUnavailable(self._where(f"{what}: {_text(exc)}; nothing sent")) from exc
        healthy = True
        try:
            try:
                connection.send_packed_command(connection.pack_commands(commands))
            except (r.RedisError, OSError) as exc:
                healthy = False
                raise StoreUnavailable(self._where(f"{what}: {_text(exc)}; not sent")) from exc
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(connection.read_response())
                except r.ResponseError as exc:
                    replies.append(exc)
                except (r.RedisError, OSError) as exc:
                    healthy = False
                    raise LostReply(
                        self._where(f"{what}: sent, but the reply was lost ({_text(exc)})")
                    ) from exc
            return replies
        finally:
            if not healthy:
                connection.disconnect()
            pool.release(connection)

    def run(
        self, script: Script, keys: Sequence[str | bytes], args: Sequence[Any], *, what: str,
        then: Sequence[Sequence[Any]] = (),
    ) -> Any:  # fmt: skip
        """Run ``script`` on the node owning ``keys[0]`` (``EVALSHA``, or ``EVAL`` where it is
        not known to be cached); ``then``: commands pipelined after it in the same write (e.g.
        ``WAIT``), whose replies follow the script's in the returned list when given."""
        route = keys[0] if keys else None
        name, _client = self.node(route)
        cached = (name, script.sha) in self._loaded
        head: list[Any] = (
            ["EVALSHA", script.sha, len(keys), *keys, *args]
            if cached
            else ["EVAL", script.text, len(keys), *keys, *args]
        )
        replies = self.call(route, [head, *then], what=what)
        r = self._redis()
        if isinstance(replies[0], r.exceptions.NoScriptError):
            # not run: a restarted (or failed-over) server lost its script cache
            self.on_extra("read")
            head = ["EVAL", script.text, len(keys), *keys, *args]
            replies = self.call(route, [head, *then], what=what)
        self._loaded.add((name, script.sha))
        first = replies[0]
        if isinstance(first, r.ResponseError):
            if self.not_run(first):
                raise StoreUnavailable(self._where(f"{what}: refused, not run ({_text(first)})"))
            raise ScriptFailed(self._where(f"{what}: {_text(first)}"))
        return replies if then else first

    def not_run(self, exc: BaseException) -> bool:
        """Whether an error reply means the server refused before running anything."""
        e = self._redis().exceptions
        refused = (
            e.BusyLoadingError, e.ReadOnlyError, e.OutOfMemoryError, e.TryAgainError,
            e.ClusterDownError, e.MasterDownError, e.AuthenticationError, e.NoPermissionError,
            e.ClusterCrossSlotError,
        )  # fmt: skip
        if isinstance(exc, refused):
            return True
        code = getattr(exc, "status_code", None) or str(exc).split(" ", 1)[0]
        return str(code).upper() in _NOT_RUN

    def _where(self, text: str) -> str:
        return redact(f"Redis {self.settings.display_url}: {text}")


def _text(exc: BaseException) -> str:
    return redact(f"{type(exc).__name__}: {exc}")[:300]
