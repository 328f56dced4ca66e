# vapipe: `make demo` sets up and runs the OCR demo; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
VAPIPE := $(VENV)/bin/vapipe
DEMO_OUT ?= demo-output

.PHONY: demo test bench peers ultralytics soak setup clean

# openvino-model-api (OpenVINO's model_api) is the reference the detector tests compare with; it
# requires opencv-python-headless, a second cv2 over opencv-python, so it is installed without its
# dependencies (numpy, OpenCV and OpenVINO are here already).
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m pip install --quiet --no-deps 'openvino-model-api==0.4.7'
	touch $@

setup: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VAPIPE) models pull
	$(VAPIPE) run ocr --source 'testsrc://ticker?frames=125' --output $(DEMO_OUT)
	$(PY) samples/read_text.py $(DEMO_OUT)

# Test files run on parallel workers, one per core (at most 4): most of the suite waits on
# servers, cameras and clusters, and one file's tests stay on one worker.  Then the timing
# checks that need the machine to themselves (marked alone) run on their own.
test: $(VENV)/.installed
	$(PY) -m pytest -n auto --maxprocesses 4 --dist loadfile -m 'not bench and not alone'
	$(PY) -m pytest -m alone

# Peers for `vapipe bench` (MediaPipe FaceMesh, RapidOCR) in their own venv: MediaPipe 0.10.14
# needs numpy 1.x and clashes with vapipe's OpenCV.
PEERS_VENV ?= .venv-peers
$(PEERS_VENV)/.installed: bench/peers/requirements.txt | $(VENV)/.installed
	$(PY) -m bench.peers.install $(PEERS_VENV)
	touch $@

peers: $(PEERS_VENV)/.installed

# Side-by-side speed benchmark (slow; not part of `make test`), both regimes: persons (1 and 4
# cameras), faces (1080p, 720p) and ocr (a 1280x720 ticker clip) at the default precision and at
# f32 (ocr once where the default is f32; also with every model on ONNX Runtime: vapipe-ort),
# YOLO objects, peers where they fit; tables on stdout, bench.json/bench.png per row in bench-output/;
# then every check of the request-priority sweep, the tight latency and rate ratios too.
# BENCH_ARGS: e.g. --only persons-1,ocr-720p-f32 --rounds 2 --frames 60.  Without the peers
# (their install failed: no wheels for this Python), the rows say so and run without them.
BENCH_ARGS ?=
bench: $(VENV)/.installed
	-$(MAKE) --no-print-directory peers
	VAPIPE_PEERS_PYTHON=$(abspath $(PEERS_VENV))/bin/python $(PY) -m bench.suite --out bench-output $(BENCH_ARGS)
	-$(PY) -m pytest -m bench -q -s tests/bench/test_priorities.py

# The yolo decoders against Ultralytics' own exports and predictor (tests/stages/
# test_ultralytics_exports.py; skipped without this venv).  Ultralytics needs PyTorch (from
# PyPI with its CUDA libraries: about 6 GB installed): in a venv of its own, only for this check.
ULTRALYTICS_VENV ?= .venv-ultralytics
$(ULTRALYTICS_VENV)/.installed:
	$(PYTHON) -m venv $(ULTRALYTICS_VENV)
	$(ULTRALYTICS_VENV)/bin/pip install --quiet ultralytics openvino onnx onnxslim onnxruntime
	touch $@

ultralytics: $(ULTRALYTICS_VENV)/.installed $(VENV)/.installed
	$(PY) -m pytest tests/stages/test_ultralytics_exports.py

# 4 cameras (2 RTSP from tests/live/rtsp_server.py, 2 looping files) for SOAK_MINUTES, one RTSP
# camera dropped every minute; prints RSS, its slope, threads, frames and drops per camera.
SOAK_MINUTES ?= 10
soak: $(VENV)/.installed
	$(PY) -m tests.live.soak --minutes $(SOAK_MINUTES)

clean:
	rm -rf $(VENV) $(PEERS_VENV) $(ULTRALYTICS_VENV) $(DEMO_OUT) output
