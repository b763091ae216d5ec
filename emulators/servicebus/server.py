"""The AMQP 1.0 server: python-qpid-proton carries framing, SASL, sessions and flow control;
this module maps links and deliveries onto the :class:`~.broker.Broker`.

Contracts:

* One thread runs the proton event loop and owns the broker. Other threads (the admin HTTP API,
  :meth:`EmulatorServer.stop`) submit work with :meth:`EmulatorServer.call`, which the loop runs
  on its next tick (every ``TICK`` seconds) and whose result or exception it hands back.
* No exception escapes an event handler: a failure is logged and, where there is one, the link or
  delivery it concerns is closed with an AMQP error. A malformed frame or a client vanishing mid
  transfer costs that connection only.
* Links: ``$cbs`` (put-token), ``<queue>[/$DeadLetterQueue]/$management`` (request/response) and
  ``<queue>[/$DeadLetterQueue]`` (send to the queue, receive in peek-lock or
  receive-and-delete). A link to an unknown entity is attached and then detached with
  ``amqp:not-found``; the CBS put-token for it already answered 404, as Service Bus does.
* Every AMQP error the emulator sends carries an ``info`` map (see :func:`error_condition`).
* Each connection's incoming bytes pass through :class:`~.wire.DeliveryIdRepair` before proton
  reads them (duplicate delivery-ids from concurrent SDK senders; frames after a session end).
* A transfer larger than ``max_message_size`` is rejected with
  ``amqp:link:message-size-exceeded``; its bytes are counted, not kept.
* Peek-lock deliveries carry the lock token as delivery tag (UUID, little-endian bytes). The
  client's unsettled disposition is answered with a settled disposition echoing the outcome
  applied, or ``rejected`` with ``com.microsoft:message-lock-lost`` when the lock is gone.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue as queue_mod
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from proton import Condition, Delivery, Endpoint, Handler, Link, Message, Session, symbol
from proton.handlers import IOHandler
from proton.reactor import Container

from . import codec
from .auth import DEFAULT_KEY, DEFAULT_KEY_NAME, SasValidator
from .broker import Broker, BrokerError
from .config import EmulatorConfig
from .management import MGMT_SUFFIX, cbs_response, entity_path, management_response
from .websocket import WebSocketServer, looks_like_http
from .wire import DeliveryIdRepair

log = logging.getLogger("cronwarden.emulators.servicebus")

TICK = 0.02
#: Credit we keep granted on links the clients send on.
RECEIVER_CREDIT = 500
#: Largest message accepted (bytes); Service Bus premium allows up to 100 MB.
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024

T = TypeVar("T")

_CBS, _MGMT, _ENTITY = "cbs", "mgmt", "entity"


@dataclass
class _LinkInfo:
    kind: str
    path: str
    key: str
    peek_lock: bool = True
    pending: deque[bytes] = field(default_factory=deque)


def _classify(address: str) -> tuple[str, str]:
    path = entity_path(address or "")
    if path.lower() == "$cbs":
        return _CBS, "$cbs"
    if path.lower().endswith(MGMT_SUFFIX.lower()):
        return _MGMT, path[: -len(MGMT_SUFFIX)]
    return _ENTITY, path


def _has_session_filter(link: Link) -> bool:
    """True when a receiver asks for a session (``com.microsoft:session-filter``)."""
    data = link.remote_source.filter
    data.rewind()
    if not data.next():
        return False
    value: Any = data.get_object()
    return isinstance(value, dict) and any(
        str(key) == "com.microsoft:session-filter" for key in value
    )


def error_condition(name: str, description: str) -> Condition:
    """An AMQP error with an ``info`` map, as Service Bus sends them.

    The SDK (pyamqp) reads the third field of every error unconditionally; without it the
    error handling callback fails and the pending operation hangs instead of raising.
    """
    info = {symbol("com.microsoft:tracking-id"): str(uuid.uuid4())}
    return Condition(name, description, cast(Any, info))


def _close_link(link: Link, condition: str, description: str) -> None:
    link.condition = error_condition(condition, description)
    link.close()


class _Handler(Handler):
    """Proton callbacks. Every ``on_*`` goes through :meth:`_guard`."""

    def __init__(self, server: EmulatorServer) -> None:
        super().__init__()
        self.server = server
        self.broker = server.broker
        self.links: dict[Link, _LinkInfo] = {}
        self.consumers: dict[str, list[Link]] = {}
        self.replies: dict[tuple[Session, str, str], Link] = {}
        self._tags = 0

    # --- plumbing ---------------------------------------------------------------------------

    def on_unhandled(self, method: str, *args: Any) -> None:
        pass

    def _guard(self, what: str, fn: Callable[[], None], link: Link | None = None) -> None:
        try:
            fn()
        except Exception:
            log.exception("error while handling %s", what)
            if link is not None:
                try:
                    _close_link(link, "amqp:internal-error", "internal error in the emulator")
                except Exception:
                    log.exception("could not close link after error")

    # --- connection / session lifecycle -----------------------------------------------------

    def on_connection_bound(self, event: Any) -> None:
        def run() -> None:
            sasl = event.transport.sasl()
            sasl.allowed_mechs("ANONYMOUS PLAIN")

        self._guard("connection bound", run)

    def on_connection_remote_open(self, event: Any) -> None:
        def run() -> None:
            conn = event.connection
            if conn.state & Endpoint.LOCAL_UNINIT:
                conn.container = "cronwarden-servicebus-emulator"
                conn.open()

        self._guard("connection open", run)

    def on_session_remote_open(self, event: Any) -> None:
        def run() -> None:
            if event.session.state & Endpoint.LOCAL_UNINIT:
                event.session.open()

        self._guard("session open", run)

    def on_link_remote_open(self, event: Any) -> None:
        self._guard("link attach", lambda: self._attach(event.link), event.link)

    def on_link_remote_close(self, event: Any) -> None:
        def run() -> None:
            self._forget(event.link)
            if event.link.state & Endpoint.LOCAL_ACTIVE:
                event.link.close()

        self._guard("link detach", run)

    def on_session_remote_close(self, event: Any) -> None:
        def run() -> None:
            if event.session.state & Endpoint.LOCAL_ACTIVE:
                event.session.close()

        self._guard("session end", run)

    def on_connection_remote_close(self, event: Any) -> None:
        def run() -> None:
            self._forget_connection(event.connection)
            if event.connection.state & Endpoint.LOCAL_ACTIVE:
                event.connection.close()

        self._guard("connection close", run)

    def on_transport_error(self, event: Any) -> None:
        cond = event.transport.condition
        log.info("transport error: %s", cond.description if cond else "unknown")

    def on_transport_closed(self, event: Any) -> None:
        def run() -> None:
            conn = event.connection
            if conn is not None:
                self._forget_connection(conn)

        self._guard("transport closed", run)

    def _forget(self, link: Link) -> None:
        info = self.links.pop(link, None)
        if info is None:
            return
        if info.kind == _ENTITY and link in self.consumers.get(info.key, []):
            self.consumers[info.key].remove(link)
        for key, reply in list(self.replies.items()):
            if reply == link:
                del self.replies[key]

    def _forget_connection(self, conn: Any) -> None:
        for link in [lnk for lnk in self.links if lnk.connection == conn]:
            self._forget(link)

    # --- attach -----------------------------------------------------------------------------

    def _attach(self, link: Link) -> None:
        if not link.state & Endpoint.LOCAL_UNINIT:
            return
        remote = link.remote_source if link.is_sender else link.remote_target
        address = remote.address or ""
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = link.remote_rcv_settle_mode
        kind, path = _classify(address)
        key = path.lower()
        if link.is_receiver:
            link.max_message_size = self.server.max_message_size
        if kind != _CBS and self.broker.resolve(path) is None:
            link.open()
            _close_link(
                link, "amqp:not-found", f"The messaging entity '{address}' could not be found."
            )
            return
        if kind == _ENTITY and link.is_sender and _has_session_filter(link):
            link.open()
            _close_link(
                link,
                "amqp:not-implemented",
                "Sessions are not supported by the cronwarden Service Bus emulator.",
            )
            return
        if kind == _ENTITY and link.is_receiver and key.endswith("/$deadletterqueue"):
            link.open()
            _close_link(link, "amqp:not-allowed", "Cannot send to a dead-letter queue.")
            return
        info = _LinkInfo(
            kind=kind,
            path=path,
            key=key,
            peek_lock=link.remote_snd_settle_mode != Link.SND_SETTLED,
        )
        link.open()
        self.links[link] = info
        if link.is_receiver:
            link.flow(RECEIVER_CREDIT)
        elif kind == _ENTITY:
            self.consumers.setdefault(key, []).append(link)
        else:
            self.replies[(link.session, kind, key)] = link
        log.debug(
            "attached %s link %s (%s)", "sender" if link.is_sender else "receiver", path, kind
        )

    # --- flow and deliveries ----------------------------------------------------------------

    def on_link_flow(self, event: Any) -> None:
        link = event.link

        def run() -> None:
            info = self.links.get(link)
            if info is None or not link.is_sender:
                return
            if info.kind == _ENTITY:
                self.pump(info.key)
            else:
                self._flush(link, info)

        self._guard("flow", run, link)

    def on_delivery(self, event: Any) -> None:
        link = event.link

        def run() -> None:
            info = self.links.get(link)
            if link.is_receiver:
                self._incoming(link, event.delivery, info)
            elif info is not None and info.kind == _ENTITY:
                self._outcome(link, event.delivery, info)
            elif event.delivery.settled:
                event.delivery.settle()

        self._guard("delivery", run, link)

    def _incoming(self, link: Link, dlv: Delivery, info: _LinkInfo | None) -> None:
        if dlv.aborted:
            dlv.settle()
            return
        chunk = link.recv(dlv.pending)
        try:
            buf = dlv.cw_buf
        except AttributeError:
            buf = bytearray()
            dlv.cw_buf = buf
            dlv.cw_size = 0
        if chunk:
            dlv.cw_size += len(chunk)
            if dlv.cw_size <= self.server.max_message_size:
                buf.extend(chunk)
            else:
                buf.clear()  # oversize: count the rest, keep none of it
        if dlv.partial:
            return
        link.advance()
        data = bytes(buf)
        dlv.cw_buf = None
        if dlv.cw_size > self.server.max_message_size:
            self._refuse_oversize(link, dlv, dlv.cw_size)
            return
        outcome = Delivery.ACCEPTED
        try:
            if info is None:
                raise BrokerError("amqp:not-found", "link is not attached to an entity")
            if info.kind == _ENTITY:
                sub = self.broker.resolve(info.path)
                if sub is None:
                    raise BrokerError("amqp:not-found", f"entity {info.path!r} was deleted")
                self.broker.enqueue(sub, data)
                self.pump(info.key)
            else:
                request = Message()
                request.decode(data)
                self._respond(link, info, request)
        except codec.CodecError as exc:
            outcome = Delivery.REJECTED
            dlv.local.condition = error_condition("amqp:decode-error", str(exc))
        except BrokerError as exc:
            outcome = Delivery.REJECTED
            dlv.local.condition = error_condition(exc.condition, exc.description)
        except Exception as exc:
            if type(exc).__name__ in ("DecodeError", "MessageException"):
                outcome = Delivery.REJECTED
                dlv.local.condition = error_condition("amqp:decode-error", "undecodable message")
            else:
                raise
        if not dlv.settled:
            dlv.update(outcome)
            dlv.settle()
        link.flow(1)

    def _refuse_oversize(self, link: Link, dlv: Delivery, size: int) -> None:
        """Reject the delivery with ``amqp:link:message-size-exceeded`` (the SDK raises
        ``MessageSizeExceededError``). Service Bus detaches the link as well; with pyamqp that
        races the rejection and the SDK then retries until its timeout, so the link stays."""
        limit = self.server.max_message_size
        description = (
            f"The received message (size: {size} bytes) exceeds the limit ({limit} bytes) "
            "currently allowed on the link."
        )
        dlv.local.condition = error_condition("amqp:link:message-size-exceeded", description)
        dlv.update(Delivery.REJECTED)
        dlv.settle()
        link.flow(1)

    def _respond(self, link: Link, info: _LinkInfo, request: Message) -> None:
        if info.kind == _CBS:
            response = cbs_response(self.broker, request, self.server.sas)
        else:
            response = management_response(self.broker, info.path, request)
            self.pump(info.key)
        reply = self.replies.get((link.session, info.kind, info.key))
        if reply is None:
            # the client may reply-link on another session of the same connection
            for (session, kind, key), candidate in self.replies.items():
                if kind == info.kind and key == info.key and session.connection == link.connection:
                    reply = candidate
                    break
        if reply is None:
            log.warning("no reply link for %s request; dropped", info.kind)
            return
        reply_info = self.links[reply]
        reply_info.pending.append(response.encode())
        self._flush(reply, reply_info)

    def _flush(self, link: Link, info: _LinkInfo) -> None:
        while info.pending and link.credit > 0:
            self._send(link, info.pending.popleft(), None)

    def _send(self, link: Link, payload: bytes, token: uuid.UUID | None) -> None:
        if token is None:
            self._tags += 1
            tag = self._tags.to_bytes(8, "big")
        else:
            tag = token.bytes_le
        dlv = link.delivery(cast(Any, tag))
        link.send(payload)
        link.advance()
        if token is None:
            dlv.settle()
        else:
            dlv.cw_token = token

    def pump(self, key: str) -> None:
        """Deliver available messages of sub-queue ``key`` to its consumers with credit."""
        consumers = self.consumers.get(key)
        if not consumers:
            return
        sub = self.broker.resolve(key)
        if sub is None:
            return
        ready = [lnk for lnk in consumers if lnk.credit > 0]
        while ready:
            for link in ready:
                got = self.broker.acquire(sub, peek_lock=self.links[link].peek_lock)
                if got is None:
                    ready = []
                    break
                msg, payload = got
                self._send(link, payload, msg.lock_token)
            ready = [lnk for lnk in ready if lnk.credit > 0]
        # Round-robin across calls: the first consumer served goes to the back.
        if len(consumers) > 1:
            consumers.append(consumers.pop(0))
        for link in consumers:
            if link.drain_mode and link.credit > 0:
                link.drained()

    def _outcome(self, link: Link, dlv: Delivery, info: _LinkInfo) -> None:
        try:
            token = dlv.cw_token
        except AttributeError:
            token = None
        state = dlv.remote_state
        if token is None or state not in (
            Delivery.ACCEPTED,
            Delivery.REJECTED,
            Delivery.RELEASED,
            Delivery.MODIFIED,
        ):
            if dlv.settled:
                dlv.settle()
            return
        failure: BrokerError | None = None
        sub = self.broker.resolve(info.path)
        try:
            if sub is None:
                raise BrokerError("com.microsoft:message-lock-lost", "The queue was deleted.", 410)
            if state == Delivery.ACCEPTED:
                self.broker.complete(sub, token)
            elif state == Delivery.RELEASED:
                self.broker.abandon(sub, token, failed=False)
            elif state == Delivery.MODIFIED:
                if dlv.remote.undeliverable:
                    self.broker.defer(sub, token)
                else:
                    self.broker.abandon(sub, token, failed=bool(dlv.remote.failed))
            else:
                cond = dlv.remote.condition
                extra: Any = cond.info if cond is not None else None
                details: dict[Any, Any] = dict(extra or {})
                reason = details.get("DeadLetterReason")
                description = details.get("DeadLetterErrorDescription")
                self.broker.dead_letter(
                    sub,
                    token,
                    str(reason) if reason is not None else None,
                    str(description) if description is not None else None,
                )
        except BrokerError as exc:
            failure = exc
        if not dlv.settled:
            if failure is None:
                if state == Delivery.MODIFIED:
                    dlv.local.failed = dlv.remote.failed
                    dlv.local.undeliverable = dlv.remote.undeliverable
                dlv.update(state)
            else:
                dlv.local.condition = error_condition(failure.condition, failure.description)
                dlv.update(Delivery.REJECTED)
        dlv.settle()
        self.pump(info.key)

    # --- timer ------------------------------------------------------------------------------

    def on_timer_task(self, event: Any) -> None:
        def run() -> None:
            self.server._run_calls()
            for sub in self.broker.tick():
                self.pump(sub.path.lower())
            for key in list(self.consumers):
                self.pump(key)

        self._guard("tick", run)
        if self.server._stopping.is_set():
            self._shutdown(event.container)
        else:
            event.container.schedule(TICK, self)

    def _shutdown(self, container: Container) -> None:
        self.server._close_acceptor()
        for link in list(self.links):
            try:
                conn = link.connection
                if conn.state & Endpoint.LOCAL_ACTIVE:
                    conn.close()
            except Exception:
                log.debug("closing a connection on shutdown failed", exc_info=True)
        self.links.clear()
        container.stop()


class _RepairingIOHandler(IOHandler):
    """proton's socket I/O, with two additions per connection: the incoming AMQP bytes pass
    through :class:`~.wire.DeliveryIdRepair` before the transport reads them, and a connection
    that opens with an HTTP ``GET`` speaks AMQP over WebSockets (:mod:`.websocket`)."""

    #: Read this much less than the transport can take: a repaired frame may grow a little.
    SLACK = 1024

    def on_selectable_readable(self, event: Any) -> None:
        s = event.selectable
        t = s._transport
        if not t:
            return
        if getattr(s, "cw_repair", None) is None:
            s.cw_repair = DeliveryIdRepair()
            s.cw_backlog = b""
            s.cw_out = b""
            s.cw_prefix = b""
            s.cw_ws = None
            s.cw_mode = None
        self._push(t, s)
        capacity = t.capacity()
        if capacity > 0 and not s.cw_backlog:
            try:
                data = s.recv(capacity - self.SLACK if capacity > 2 * self.SLACK else capacity)
            except OSError as exc:
                log.info("could not read from a client: %r", exc)
                t.close_tail()
            else:
                if not data:
                    self.on_selectable_error(event)
                    return
                self._incoming(t, s, data)
        self.update(t, s, s._reactor.now)

    def _incoming(self, t: Any, s: Any, data: bytes) -> None:
        if s.cw_mode is None:
            s.cw_prefix += data
            http = looks_like_http(s.cw_prefix)
            if http is None:
                return
            data, s.cw_prefix = s.cw_prefix, b""
            s.cw_mode = "ws" if http else "amqp"
            if http:
                s.cw_ws = WebSocketServer()
        if s.cw_mode == "ws":
            data, reply = s.cw_ws.feed(data)
            s.cw_out += reply
            if s.cw_ws.closed:
                t.close_tail()
        if data:
            s.cw_backlog = s.cw_repair.feed(data)
            self._push(t, s)

    def on_selectable_writable(self, event: Any) -> None:
        s = event.selectable
        t = s._transport
        if getattr(s, "cw_mode", None) != "ws" and not getattr(s, "cw_out", b""):
            super().on_selectable_writable(event)
            return
        if not t:
            return
        pending = t.pending()
        if pending > 0 and s.cw_ws is not None and s.cw_ws.open:
            data = t.peek(pending)
            t.pop(len(data))
            s.cw_out += WebSocketServer.wrap(data)
        if s.cw_out:
            try:
                sent = s.send(s.cw_out)
            except OSError as exc:
                log.info("could not write to a client: %r", exc)
                t.close_head()
            else:
                s.cw_out = s.cw_out[sent:]
        self.update(t, s, s._reactor.now)

    @staticmethod
    def _push(t: Any, s: Any) -> None:
        backlog: bytes = getattr(s, "cw_backlog", b"")
        if backlog:
            room = t.capacity()
            if room > 0:
                t.push(backlog[:room])
                s.cw_backlog = backlog[room:]

    @staticmethod
    def update(transport: Any, selectable: Any, now: float) -> None:
        """As proton's, but bytes held back (a frame completed by the last read can exceed the
        transport's free space) are pushed first, and while any remain the selectable expires
        at once, so they reach proton without waiting for the client to send more. Bytes
        waiting to go out on a WebSocket keep the selectable writing."""
        if getattr(selectable, "cw_backlog", b"") and not selectable.is_terminal:
            _RepairingIOHandler._push(transport, selectable)
        IOHandler.update(transport, selectable, now)
        if selectable.is_terminal:
            return
        changed = False
        if getattr(selectable, "cw_backlog", b""):
            selectable.deadline = now
            changed = True
        if getattr(selectable, "cw_out", b"") and not selectable.writing:
            selectable.writing = True
            changed = True
        if changed:
            selectable.update()


class EmulatorServer:
    """The Service Bus emulator: AMQP on ``host:port``.

    ``run()`` blocks in the calling thread until :meth:`stop`; ``start()`` runs it in a daemon
    thread and returns once the port is listening. ``port=0`` picks a free port (read
    :attr:`port` after ``start``).
    """

    def __init__(
        self,
        config: EmulatorConfig,
        *,
        host: str = "127.0.0.1",
        port: int = 5672,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        sas: SasValidator | None = None,
    ) -> None:
        self.config = config
        self.sas = sas if sas is not None else SasValidator()
        self.broker = Broker(config)
        self.host = host
        self.port = port
        self.max_message_size = max_message_size
        self._calls: queue_mod.Queue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = (
            queue_mod.Queue()
        )
        self._stopping = threading.Event()
        self._listening = threading.Event()
        self._thread: threading.Thread | None = None
        self._acceptor: Any = None
        self._error: BaseException | None = None
        self._handler: _Handler | None = None

    def run(self) -> None:
        handler = self._handler = _Handler(self)
        container = Container(handler)
        container.container_id = "cronwarden-servicebus-emulator"
        container.global_handler = _RepairingIOHandler()
        try:
            self._acceptor = container.listen(f"{self.host}:{self.port}")
            sock = self._acceptor._selectable._delegate
            self.port = int(sock.getsockname()[1])
        except Exception as exc:
            self._error = exc
            self._listening.set()
            raise
        container.schedule(TICK, handler)
        self._listening.set()
        container.run()

    def _close_acceptor(self) -> None:
        if self._acceptor is not None:
            self._acceptor.close()
            self._acceptor = None

    def start(self, timeout: float = 10.0) -> EmulatorServer:
        self._thread = threading.Thread(target=self.run, name="servicebus-emulator", daemon=True)
        self._thread.start()
        if not self._listening.wait(timeout):
            raise RuntimeError("the emulator did not start listening")
        if self._error is not None:
            raise self._error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the loop to close connections and return; safe from any thread or signal."""
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """Run ``fn`` on the event loop thread (it owns the broker) and return its result."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._calls.put((fn, future))
        return future.result(timeout)

    def open_links(self) -> int:
        """How many client links are attached right now (for tests and tooling)."""
        return self.call(lambda: len(self._handler.links) if self._handler else 0)

    def _run_calls(self) -> None:
        while True:
            try:
                fn, future = self._calls.get_nowait()
            except queue_mod.Empty:
                return
            try:
                future.set_result(fn())
            except Exception as exc:
                future.set_exception(exc)

    @property
    def connection_string(self) -> str:
        name, key = next(iter(self.sas.keys.items()), (DEFAULT_KEY_NAME, DEFAULT_KEY))
        return connection_string(self.host, self.port, name, key)


def connection_string(
    host: str, port: int, key_name: str = DEFAULT_KEY_NAME, key: str = DEFAULT_KEY
) -> str:
    """The connection string for the SDK (by default with the emulator's well-known dummy key)."""
    return (
        f"Endpoint=sb://{host}:{port};SharedAccessKeyName={key_name};"
        f"SharedAccessKey={key};UseDevelopmentEmulator=true"
    )
