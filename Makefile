# vapipe: `make demo` sets up and runs the OCR demo; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
VAPIPE := $(VENV)/bin/vapipe
DEMO_OUT ?= demo-output

.PHONY: demo test bench setup clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

setup: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VAPIPE) models pull
	$(VAPIPE) run ocr --source 'testsrc://ticker?frames=125' --output $(DEMO_OUT)
	$(PY) samples/read_text.py $(DEMO_OUT)

test: $(VENV)/.installed
	$(PY) -m pytest

# Side-by-side speed benchmark (slow; not part of `make test`).
bench: $(VENV)/.installed
	$(PY) -m tests.bench.persons_speed

clean:
	rm -rf $(VENV) $(DEMO_OUT) output
