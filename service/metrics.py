"""``GET /metrics``: Prometheus metrics read from the instances at scrape time.

Labels are bounded: ``instance`` (ids of the instances the server keeps, at most
``keep_finished`` stopped ones), ``pipeline``, ``source`` (source ids, no
credentials), ``stage`` (stage names of the pipeline), ``queue``, ``state``.
Units are seconds; counters end in ``_total``.
"""

from __future__ import annotations

from typing import Any, Iterator

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily,
                                    InfoMetricFamily)
from prometheus_client.registry import Collector, CollectorRegistry

from pipeline.stats import LATENCY_BUCKETS_MS, LatencyStats
from stages.decode import STATES as DECODE_STATES

from .instances import STATES, InstanceManager

__all__ = ["VapipeCollector", "make_registry"]

#: states of a source: a live source's own (stages/decode.py), and ``failed`` (its error ended it)
SOURCE_STATES = (*DECODE_STATES, "failed")


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
        fps = GaugeMetricFamily("vapipe_source_fps", "Steady-state frame rate (frames per second)", labels=src_labels)
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
        for inst in self.manager.all():
            base = [inst.id, inst.name]
            for st in STATES:
                inst_state.add_metric([*base, st], 1.0 if inst.state == st else 0.0)
            handle = inst.handle
            if handle is None:
                continue
            live = handle.live_stats()
            for s in handle.sources():
                labels = [*base, s["id"]]
                frames.add_metric(labels, s["frames"])
                dropped.add_metric(labels, s["dropped"])
                decode_errors.add_metric(labels, s["decode_errors"])
                reconnects.add_metric(labels, s["reconnects"])
                for st in SOURCE_STATES:
                    state.add_metric([*labels, st], 1.0 if s["state"] == st else 0.0)
                fps.add_metric(labels, s["fps"])
                queue.add_metric([*labels, "packets"], s["queue_packets"])
                queue.add_metric([*labels, "frames"], s["queue_frames"])
                for stage, n in s["in_flight"].items():
                    inflight.add_metric([*labels, stage], n)
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
                mqtt_up.add_metric(base, float(min(p["connected"] for p in pubs)))
        yield from (frames, dropped, decode_errors, reconnects, state, fps, queue, inflight, e2e, stage_lat,
                    inst_state, plan, viewers, live_frames, mqtt, mqtt_up)


def make_registry(manager: InstanceManager) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(VapipeCollector(manager))
    return registry
