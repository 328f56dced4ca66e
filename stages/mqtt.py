"""MQTT sink: every frame's record and every event to a broker (paho-mqtt 2.x).

A camera never waits for the broker: :meth:`Mqtt.process` serialises the record
and appends it to a bounded buffer; a sender thread hands messages to the
broker while it is connected.  While the broker is away, messages wait in the
buffer (``buffer`` messages at most); the rest are dropped and counted.  The
client reconnects by itself with exponential backoff (``reconnect_min_s`` to
``reconnect_max_s``).

Cameras of one process that publish with the same client id share one
connection.  On connect the client publishes ``online`` (retained, QoS 1) to
``availability_topic``; the broker publishes the last will ``offline`` there if
the connection dies, and :meth:`Mqtt.close` publishes ``offline`` itself after
flushing the buffer (for up to ``flush_timeout_s``).

Counters (:meth:`Publisher.counters`): ``produced`` (offered), ``sent``
(written for QoS 0, acknowledged for QoS 1 and 2), ``dropped`` (buffer full),
``buffered`` (waiting), ``connected``, ``connects``; of the whole connection, or of
the messages one sink offered (:meth:`Mqtt.counters_of_publisher`), so that sinks
sharing a connection are not counted twice.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from typing import Any, ClassVar

from pydantic import Field, field_validator

from pipeline.frame import Frame
from pipeline.frame_view import SINK_VIEW_HELP, SinkView, sink_picture
from pipeline.stage import Params as StageParams
from pipeline.stage import Stage, StageError

from .records import Schema, event_record, frame_events, frame_record, to_json

__all__ = ["Mqtt", "Publisher", "parse_host"]

log = logging.getLogger("vapipe.mqtt")


def parse_host(host: str, default_port: int = 1883) -> tuple[str, int]:
    """``"HOST"`` or ``"HOST:PORT"`` (``[v6]:PORT``) -> (host, port); ValueError naming the value."""
    text = host.strip()
    if text.startswith("["):
        name, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        name, _, port_text = text.partition(":") if text.count(":") == 1 else (text, "", "")
    if not name:
        raise ValueError(f"MQTT host {host!r}: expected HOST or HOST:PORT")
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise ValueError(f"MQTT host {host!r}: port {port_text!r} is not a number") from None
    if not 0 < port < 65536:
        raise ValueError(f"MQTT host {host!r}: port {port} out of range 1-65535")
    return name, port


def fill_topic(template: str, instance: str, source: str, name: str) -> str:
    """``template`` with its fields filled; wildcard characters of the values (a file named
    ``cam+1.mp4``) become ``_``.  ValueError naming the valid fields for a bad template."""
    clean = {k: v.replace("+", "_").replace("#", "_") for k, v in
             (("instance", instance), ("source", source), ("name", name))}
    try:
        return template.format(**clean)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"bad topic template {template!r} ({exc!r}); valid fields: {{instance}}, {{source}}, "
                         "{name}") from None


class Mqtt(Stage):
    """Publishes each frame's record (and events) to ``topic`` on an MQTT broker."""

    kind: ClassVar[str] = "sink"

    class Params(StageParams):
        host: str = Field("127.0.0.1:1883", description="broker as HOST:PORT")
        topic: str = Field("vapipe/{instance}/metadata", description="topic template: {instance}, {source}, {name}")
        qos: int = Field(0, ge=0, le=2, description="MQTT quality of service for records and events")
        instance: str = Field("", description="name in the default topics and client id (default vapipe-PID)")
        client_id: str = Field("", description="MQTT client id (default vapipe-INSTANCE)")
        availability_topic: str = Field("vapipe/{instance}/available", description="retained online/offline topic")
        schema_: Schema = Field("vapipe", alias="schema", description="record shape: vapipe or dlstreamer")
        tags: dict[str, Any] = Field(default_factory=dict, description="added to every record as 'tags'")
        labels: list[str] = Field(default_factory=list, description="label order for dlstreamer's label_id")
        include_landmarks: bool = Field(False, description="write landmark points instead of their count")
        view: SinkView = Field("source", description=SINK_VIEW_HELP)
        buffer: int = Field(1000, ge=1, description="messages kept while the broker is away; the rest are dropped")
        keepalive_s: int = Field(30, ge=5, description="MQTT keepalive")
        reconnect_min_s: float = Field(0.5, gt=0, description="first reconnect delay (doubles up to the max)")
        reconnect_max_s: float = Field(30.0, gt=0, description="longest reconnect delay")
        flush_timeout_s: float = Field(2.0, ge=0, description="on close, wait this long for buffered messages")

        @field_validator("host")
        @classmethod
        def _host(cls, value: str) -> str:
            parse_host(value)
            return value

        @field_validator("topic", "availability_topic")
        @classmethod
        def _a_topic_to_publish_to(cls, template: str) -> str:
            """A template that fills (its fields known) and names one topic: MQTT's wildcards
            ``+`` and ``#`` are for subscribing, a publish to them is refused."""
            topic = fill_topic(template, "i", "s", "n")
            if "+" in topic or "#" in topic or not topic:
                raise ValueError(f"topic {template!r} is not one a message can be published to (empty, or with "
                                 "the wildcards + or #)")
            return template

    params: Params

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.publisher: Publisher | None = None
        #: the publisher of the latest open, kept after close: its counters are then final
        self.last_publisher: Publisher | None = None
        self._topic: tuple[str, str] | None = None  # (source id, the topic filled for it)
        self._owner = object()  # tags this sink's messages in a shared publisher's counters

    @property
    def instance(self) -> str:
        return self.params.instance or f"vapipe-{os.getpid()}"

    @property
    def topic(self) -> str:
        """The topic records go to, for the source this sink serves (used on its own, the
        source of its first frame)."""
        if self._topic is None or self._topic[0] != self.source_id:
            self._topic = (self.source_id, self._fill(self.params.topic))
        return self._topic[1]

    def _fill(self, template: str) -> str:
        try:
            return fill_topic(template, self.instance, self.source_id or "source", self.name)
        except ValueError as exc:
            raise StageError(f"{self.name}: {exc}") from None

    def open(self) -> None:
        self.close()
        p = self.params
        self._fill(p.topic)  # a bad template fails here, on open
        host, port = parse_host(p.host)
        self.publisher = self.last_publisher = Publisher.acquire(
            host, port, p.client_id or f"vapipe-{self.instance}", self._fill(p.availability_topic), p)

    def process(self, frame: Frame) -> Frame | None:
        p = self.params
        if self.publisher is not None:
            shown, _ = sink_picture(frame, p.view)  # camera pixels unless view: preprocessed
            record = frame_record(p.schema_, shown, include_landmarks=p.include_landmarks, tags=p.tags,
                                  labels=p.labels)
            self.publisher.offer(self.topic, to_json(record), p.qos, self._owner)
            for event in frame_events(p.schema_, frame, p.tags):  # zone and line events of this frame
                self.publisher.offer(self.topic, to_json(event), p.qos, self._owner)
        return frame

    def write_event(self, kind: str, **fields: Any) -> None:
        """Publish an event (source state change, zone or line event) on the same topic."""
        if self.publisher is not None:
            record = event_record(self.params.schema_, kind, self.source_id, fields, self.params.tags)
            self.publisher.offer(self.topic, to_json(record), self.params.qos, self._owner)

    def close(self) -> None:
        pub, self.publisher = self.publisher, None
        if pub is not None:
            pub.release(self.params.flush_timeout_s)

    def counters_of_publisher(self) -> dict[str, int] | None:
        """:meth:`Publisher.counters` of the messages this sink offered (``connected`` and
        ``connects`` are the connection's), from its open publisher or its last one (then
        final); None before it first opened."""
        pub = self.last_publisher
        return None if pub is None else pub.counters(self._owner)


class Publisher:
    """One MQTT connection shared by the sinks with the same (host, port, client id)."""

    _registry: ClassVar[dict[tuple[str, int, str], "Publisher"]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, host: str, port: int, client_id: str, availability: str, params: Mqtt.Params) -> None:
        try:
            import paho.mqtt.client as mqtt
        except ImportError:
            raise StageError("the mqtt stage needs paho-mqtt 2.x: pip install 'paho-mqtt>=2'") from None
        if not hasattr(mqtt, "CallbackAPIVersion"):
            raise StageError("the mqtt stage needs paho-mqtt 2.x (found 1.x): pip install 'paho-mqtt>=2'")
        self._mqtt = mqtt
        self.key = (host, port, client_id)
        self.host, self.port, self.availability = host, port, availability
        self.bound = params.buffer
        self.users = 0
        self.handed = self.connects = 0
        #: owner (a sink's tag, None for untagged messages) -> its produced, sent and dropped
        #: messages; the connection's are their sums
        self._by_owner: dict[object, dict[str, int]] = {}
        self._buf: deque[tuple[str, bytes, int, object]] = deque()
        self._own_mids: set[int] = set()
        self._mid_owner: dict[int, object] = {}  # messages handed to paho, until acknowledged
        self._acked_early: set[int] = set()  # acknowledged before their owner was recorded
        self._cond = threading.Condition()
        self._connected = False
        self._closing = False
        self._reached = False  # connected once, or the failure to connect was logged
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=True)
        client.will_set(availability, b"offline", qos=1, retain=True)
        client.reconnect_delay_set(min_delay=params.reconnect_min_s,  # type: ignore[arg-type] - floats work
                                   max_delay=max(params.reconnect_min_s, params.reconnect_max_s))
        client.max_inflight_messages_set(20)
        client.max_queued_messages_set(100)
        client.on_connect = self._on_connect
        client.on_connect_fail = self._on_connect_fail
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        self.client = client
        client.connect_async(host, port, keepalive=params.keepalive_s)
        client.loop_start()
        self._sender = threading.Thread(target=self._send_loop, name=f"mqtt:{client_id}", daemon=True)
        self._sender.start()

    @classmethod
    def acquire(cls, host: str, port: int, client_id: str, availability: str, params: Mqtt.Params) -> Publisher:
        with cls._registry_lock:
            pub = cls._registry.get((host, port, client_id))
            if pub is None:
                pub = cls._registry[(host, port, client_id)] = cls(host, port, client_id, availability, params)
            pub.users += 1
            return pub

    # paho callbacks (paho's network thread) -------------------------------------------
    def _on_connect(self, client: Any, _userdata: Any, _flags: Any, reason_code: Any, _props: Any) -> None:
        if getattr(reason_code, "is_failure", False):
            log.warning("MQTT broker %s:%d refused the connection: %s", self.host, self.port, reason_code)
            return
        info = client.publish(self.availability, b"online", qos=1, retain=True)
        with self._cond:
            self._own_mids.add(info.mid)  # acknowledged later on this thread: not a record
            self._connected = self._reached = True
            self.connects += 1
            self._cond.notify_all()
        log.info("MQTT connected to %s:%d", self.host, self.port)

    def _on_connect_fail(self, _client: Any, _userdata: Any) -> None:
        """The first connection attempt that fails is logged (later ones retry quietly)."""
        with self._cond:
            first, self._reached = not self._reached, True
        if first and not self._closing:
            log.warning("MQTT broker %s:%d cannot be reached; retrying with backoff (up to %d messages wait)",
                        self.host, self.port, self.bound)

    def _on_disconnect(self, _client: Any, _userdata: Any, _flags: Any, reason_code: Any, _props: Any) -> None:
        with self._cond:
            was, self._connected = self._connected, False
        if was and not self._closing:
            log.warning("MQTT broker %s:%d went away (%s); reconnecting with backoff", self.host, self.port,
                        reason_code)

    def _on_publish(self, _client: Any, _userdata: Any, mid: int, _reason: Any, _props: Any) -> None:
        with self._cond:
            if mid in self._own_mids:
                self._own_mids.discard(mid)
                return
            if mid in self._mid_owner:
                self._count(self._mid_owner.pop(mid), "sent")
            else:  # the sender thread has not recorded whose it was yet
                self._acked_early.add(mid)

    def _count(self, owner: object, outcome: str) -> None:
        counts = self._by_owner.setdefault(owner, {"produced": 0, "sent": 0, "dropped": 0})
        counts[outcome] += 1

    # producers (camera threads) ------------------------------------------------------------
    def offer(self, topic: str, payload: str, qos: int, owner: object = None) -> None:
        """Queue a message; never blocks (a full buffer drops it and counts it).  ``owner``
        tags it in :meth:`counters` (None: counted for the connection only)."""
        with self._cond:
            self._count(owner, "produced")
            if len(self._buf) >= self.bound:
                self._count(owner, "dropped")
                return
            self._buf.append((topic, payload.encode("utf-8"), qos, owner))
            self._cond.notify_all()

    def _send_loop(self) -> None:
        mqtt = self._mqtt
        while True:
            with self._cond:
                while not (self._buf and self._connected) and not self._closing:
                    self._cond.wait(0.2)
                if self._closing and not (self._buf and self._connected):
                    return
                topic, payload, qos, owner = self._buf[0]
            try:
                info = self.client.publish(topic, payload, qos=qos)
            except ValueError as exc:  # a topic the client refuses: drop that message, keep sending
                with self._cond:
                    self._buf.popleft()
                    self._count(owner, "dropped")
                log.warning("MQTT: message to %r dropped: %s", topic, exc)
                continue
            with self._cond:
                if info.rc == mqtt.MQTT_ERR_SUCCESS:
                    self._buf.popleft()
                    self.handed += 1
                    if info.mid in self._acked_early:
                        self._acked_early.discard(info.mid)
                        self._count(owner, "sent")
                    else:
                        self._mid_owner[info.mid] = owner
                    continue
                if info.rc == mqtt.MQTT_ERR_NO_CONN:
                    self._connected = False
                # paho's own queue is full or the connection just dropped: try again shortly
                self._cond.wait(0.05)

    def counters(self, owner: object = None) -> dict[str, int]:
        """The connection's counters, or (``owner`` given) those of the messages it offered."""
        with self._cond:
            link = {"connected": int(self._connected), "connects": self.connects}
            if owner is None:
                total = {k: sum(c[k] for c in self._by_owner.values()) for k in ("produced", "sent", "dropped")}
                return {**total, "buffered": len(self._buf), **link}
            own = self._by_owner.get(owner, {"produced": 0, "sent": 0, "dropped": 0})
            return {**own, "buffered": sum(1 for m in self._buf if m[3] is owner), **link}

    def release(self, flush_timeout_s: float = 2.0) -> None:
        with self._registry_lock:
            self.users -= 1
            if self.users > 0:
                return
            self._registry.pop(self.key, None)
        with self._cond:
            deadline_wait = flush_timeout_s
            while self._buf and deadline_wait > 0:  # also while (re)connecting
                self._cond.wait(0.05)
                deadline_wait -= 0.05
            self._closing = True
            self._cond.notify_all()
        self._sender.join(timeout=2.0)
        try:
            if self._connected:
                with self._cond:  # its acknowledgement waits for this lock: not counted as a record
                    info = self.client.publish(self.availability, b"offline", qos=1, retain=True)
                    self._own_mids.add(info.mid)
                info.wait_for_publish(timeout=max(0.5, flush_timeout_s))
            self.client.disconnect()
        except Exception as exc:  # noqa: BLE001 - closing must not fail the run
            log.debug("MQTT close: %s", exc)
        finally:
            self.client.loop_stop()
        with self._cond:
            left = len(self._buf)
            for message in self._buf:  # lost with the close: counted as the buffer's overflow is
                self._count(message[3], "dropped")
            self._buf.clear()
        if left:
            log.warning("MQTT %s:%d: %d messages not sent before close", self.host, self.port, left)
