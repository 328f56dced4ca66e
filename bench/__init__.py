"""Side-by-side benchmarks of vapipe pipelines (``vapipe bench``, ``make bench``).

A tools layer on top of the core: it imports :mod:`pipeline` and :mod:`stages`, and
they never import it.  One job per module:

* :mod:`bench.plan` — what a worker process is asked to run (:class:`~bench.plan.BenchPlan`), mode names;
* :mod:`bench.measure` — clocks, per-camera results, recorded frames (numpy and PyAV only);
* :mod:`bench.chain` — the detector and region models a pipeline runs, as the baselines load them;
* :mod:`bench.naive`, :mod:`bench.hand_tuned` — the loops users write;
* :mod:`bench.limits` — decoding alone and the models alone;
* :mod:`bench.vapipe_modes`, :mod:`bench.recorder` — the real runtime with an in-memory sink;
* :mod:`bench.engine_modes` — vapipe with every model on ONNX Runtime (``--engine onnxruntime``);
* :mod:`bench.peers` — other frameworks (MediaPipe, RapidOCR), run by their own interpreter;
* :mod:`bench.worker`, :mod:`bench.runner` — one mode per fresh process, interleaved rounds, medians;
* :mod:`bench.agreement`, :mod:`bench.targets`, :mod:`bench.report`, :mod:`bench.chart` — whether the
  modes found the same things, the ratios and targets, the table and the charts;
* :mod:`bench.cli` (``vapipe bench``), :mod:`bench.suite` (``make bench``), :mod:`bench.clips`,
  :mod:`bench.tune` (``vapipe tune``), :mod:`bench.int8`, :mod:`bench.persons_speed`,
  :mod:`bench.priorities`, :mod:`bench.preprocess`.

Nothing is imported here: :mod:`bench.peers.worker` runs under an interpreter without
vapipe's dependencies and imports only the modules it needs.
"""
