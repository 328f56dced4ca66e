"""``GET /metrics``: Prometheus metrics read from the instances at scrape time.

Labels are bounded: ``instance`` (ids of the instances the server keeps, at most
``keep_finished`` stopped ones), ``pipeline``, ``source`` (source ids, no
credentials), ``stage`` (stage names of the pipeline), ``queue``, ``state``.
Units are seconds; counters end in ``_total``.  Once an instance has ended, its counters keep
their final values (MQTT messages the close could not send count as dropped) and its gauges
(rate, queues, requests in flight) read 0.  A source's rate (``vapipe_source_fps``, from its first
to its latest frame) reads 0 also while its state is not ``streaming`` (connecting, stalled,
reconnecting): it runs at no rate then; the status's ``avg_fps`` keeps the average over its life.

With ``vapipe serve --cluster`` the same families cover every camera on the cluster
(gathered by this process from the actors), sources may also be ``pending``,
``starting`` or ``lost``, and ``vapipe_cluster_*`` families add cameras per cluster
state, actors and camera losses (failovers) per instance, and the nodes alive and lost.
"""

from __future__ import annotations

from typing import Any, Iterator

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily,
                                    InfoMetricFamily)
from prometheus_client.registry import Collector, CollectorRegistry

from pipeline.stats import LATENCY_BUCKETS_MS, LatencyStats
from stages.decode import STATES as DECODE_STATES

from .backend import REMOTE_SOURCE_STATES
from .instances import STATES, InstanceManager

__all__ = ["VapipeCollector", "make_registry"]

#: states of a source: a live source's own (stages/decode.py), and ``failed`` (its error ended it)
SOURCE_STATES = (*DECODE_STATES, "failed")
#: states of a source run on a cluster node: also waiting for room, its actor starting, its node lost
CLUSTER_SOURCE_STATES = (*SOURCE_STATES, *REMOTE_SOURCE_STATES)


def _buckets(lat: LatencyStats) -> list[tuple[str, float]]:
    out, total = [], 0
    for bound, n in zip(LATENCY_BUCKETS_MS, lat.buckets):
        total += n
        out.append((_fmt(bound / 1000.0), float(total)))
    out.append(("+Inf", float(lat.count)))
    return out


def _fmt(value: float) -> str:
    return repr(float(value))


class VapipeCollector(Collector):
    def __init__(self, manager: InstanceManager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Any]:
        src_labels = ["instance", "pipeline", "source"]
        frames = CounterMetricFamily("vapipe_frames", "Frames that went through every stage", labels=src_labels)
        dropped = CounterMetricFamily("vapipe_dropped_frames", "Frames dropped because the pipeline was behind "
                                      "(live sources keep the newest)", labels=src_labels)
        decode_errors = CounterMetricFamily("vapipe_decode_errors", "Undecodable packets skipped", labels=src_labels)
        reconnects = CounterMetricFamily("vapipe_reconnects", "Reconnection attempts of live sources",
                                         labels=src_labels)
        state = GaugeMetricFamily("vapipe_source_state", "1 for the state the source is in",
                                  labels=[*src_labels, "state"])
        fps = GaugeMetricFamily("vapipe_source_fps", "Frame rate while the source streams, else 0 "
                                "(frames per second)", labels=src_labels)
        queue = GaugeMetricFamily("vapipe_queue_depth", "Items waiting in a source's queues",
                                  labels=[*src_labels, "queue"])
        inflight = GaugeMetricFamily("vapipe_inflight_requests", "Frames in asynchronous inference per stage",
                                     labels=[*src_labels, "stage"])
        e2e = HistogramMetricFamily("vapipe_frame_latency_seconds", "Time from decoder output to the end of the "
                                    "graph", labels=src_labels)
        stage_lat = HistogramMetricFamily("vapipe_stage_latency_seconds", "Time a frame spends in a stage "
                                          "(inference stages: submit to result)",
                                          labels=["instance", "pipeline", "stage"])
        inst_state = GaugeMetricFamily("vapipe_instance_state", "1 for the state the instance is in",
                                       labels=["instance", "pipeline", "state"])
        plan = InfoMetricFamily("vapipe_thread_plan", "Thread plan of the instance",
                                labels=["instance", "pipeline"])
        viewers = GaugeMetricFamily("vapipe_live_viewers", "Live-view clients watching a source", labels=src_labels)
        live_frames = CounterMetricFamily("vapipe_live_frames", "JPEG frames made for live viewers",
                                          labels=src_labels)
        mqtt = CounterMetricFamily("vapipe_mqtt_messages", "MQTT messages by outcome (sent, dropped)",
                                   labels=["instance", "pipeline", "outcome"])
        mqtt_up = GaugeMetricFamily("vapipe_mqtt_connected", "1 while the MQTT connection is up",
                                    labels=["instance", "pipeline"])
        mqtt_buffered = GaugeMetricFamily("vapipe_mqtt_buffered_messages", "MQTT messages waiting for the broker "
                                          "(at most the stage's buffer; more are dropped)",
                                          labels=["instance", "pipeline"])
        cluster = _ClusterFamilies(src_labels)
        for inst in self.manager.all():
            base = [inst.id, inst.name]
            for st in STATES:
                inst_state.add_metric([*base, st], 1.0 if inst.state == st else 0.0)
            handle = inst.handle
            if handle is None:
                continue
            live = handle.live_stats()
            ended = handle.finished()  # its gauges read 0: an ended source runs at no rate
            cluster_stats = getattr(handle, "cluster_stats", None)  # cameras on a cluster
            source_states = CLUSTER_SOURCE_STATES if cluster_stats is not None else SOURCE_STATES
            for s in handle.sources():
                labels = [*base, s["id"]]
                frames.add_metric(labels, s["frames"])
                dropped.add_metric(labels, s["dropped"])
                decode_errors.add_metric(labels, s["decode_errors"])
                reconnects.add_metric(labels, s["reconnects"])
                for st in source_states:
                    state.add_metric([*labels, st], 1.0 if s["state"] == st else 0.0)
                fps.add_metric(labels, s["fps"] if not ended and s["state"] == "streaming" else 0.0)
                queue.add_metric([*labels, "packets"], 0 if ended else s["queue_packets"])
                queue.add_metric([*labels, "frames"], 0 if ended else s["queue_frames"])
                for stage, n in s["in_flight"].items():
                    inflight.add_metric([*labels, stage], 0 if ended else n)
                lat: LatencyStats = s["latency"]
                e2e.add_metric(labels, _buckets(lat), lat.total_ms / 1000.0)
                viewers.add_metric(labels, live["viewers"].get(s["id"], 0))
                live_frames.add_metric(labels, live["produced"].get(s["id"], 0))
            for stage, lat in handle.stages().items():
                stage_lat.add_metric([*base, stage], _buckets(lat), lat.total_ms / 1000.0)
            plan.add_metric(base, handle.plan())
            pubs = handle.publishers()
            if pubs:
                mqtt.add_metric([*base, "sent"], sum(p["sent"] for p in pubs))
                mqtt.add_metric([*base, "dropped"], sum(p["dropped"] for p in pubs))
                mqtt_up.add_metric(base, float(min((p["connected"] for p in pubs if "connected" in p), default=0)))
                mqtt_buffered.add_metric(base, sum(p["buffered"] for p in pubs))
            if cluster_stats is not None:
                cluster.add_instance(base, cluster_stats())
        yield from (frames, dropped, decode_errors, reconnects, state, fps, queue, inflight, e2e, stage_lat,
                    inst_state, plan, viewers, live_frames, mqtt, mqtt_up, mqtt_buffered)
        backend_stats = getattr(self.manager.backend, "cluster_stats", None)
        if backend_stats is not None:  # vapipe serve --cluster
            yield from cluster.families(backend_stats())


class _ClusterFamilies:
    """The ``vapipe_cluster_*`` families (names as ``cluster.ClusterRun.metrics`` gives them)."""

    def __init__(self, src_labels: list[str]) -> None:
        inst = ["instance", "pipeline"]
        self.cameras = GaugeMetricFamily("vapipe_cluster_cameras", "Cameras of the instance by cluster state "
                                         "(pending: no node has room; lost: being placed again)",
                                         labels=[*inst, "state"])
        self.actors = GaugeMetricFamily("vapipe_cluster_actors", "Ray actor processes running the instance's "
                                        "cameras", labels=inst)
        self.losses = CounterMetricFamily("vapipe_cluster_camera_losses", "Times the camera's node or actor was "
                                          "lost and the camera placed again (failovers)", labels=src_labels)

    def add_instance(self, base: list[str], stats: dict[str, Any]) -> None:
        for st, n in stats["cameras"].items():
            self.cameras.add_metric([*base, st], float(n))
        self.actors.add_metric(base, float(stats["actors"]))
        for source, n in stats["losses"].items():
            self.losses.add_metric([*base, source], float(n))

    def families(self, backend: dict[str, float]) -> Iterator[Any]:
        yield from (self.cameras, self.actors, self.losses)
        if backend:  # empty when the cluster cannot be reached
            for name, doc, kind in (("nodes_alive", "Ray nodes alive", GaugeMetricFamily),
                                    ("cpus", "Ray CPUs of the nodes alive", GaugeMetricFamily),
                                    ("nodes_lost", "Ray nodes lost since the server started", CounterMetricFamily)):
                yield kind(f"vapipe_cluster_{name}", doc, value=backend[name])


def make_registry(manager: InstanceManager) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(VapipeCollector(manager))
    return registry
