# vapipe: `make demo` sets up and runs the OCR demo; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
VAPIPE := $(VENV)/bin/vapipe
DEMO_OUT ?= demo-output

.PHONY: demo test bench soak setup clean

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

test: $(VENV)/.installed
	$(PY) -m pytest

# Side-by-side speed benchmark (slow; not part of `make test`): `vapipe bench` for persons
# (1 and 4 cameras) and faces on 1080p clips, faces on the 480x270 GIF; tables on stdout, bench.json/bench.png in bench-output/.
bench: $(VENV)/.installed
	$(PY) -m tests.bench.speed --out bench-output

# 4 cameras (2 RTSP from tests/live/rtsp_server.py, 2 looping files) for SOAK_MINUTES, one RTSP
# camera dropped every minute; prints RSS, its slope, threads, frames and drops per camera.
SOAK_MINUTES ?= 10
soak: $(VENV)/.installed
	$(PY) -m tests.bench.soak --minutes $(SOAK_MINUTES)

clean:
	rm -rf $(VENV) $(DEMO_OUT) output
