"""Property-based fuzzing of the pipeline-file loader.

Starting from the shipped ``pipelines.yaml`` and a few small valid files,
hypothesis applies random mutations (lines deleted, duplicated, swapped or
re-indented, scalars replaced by values of other types, random keys, unicode,
very long strings, wrong nesting, anchors and aliases, tabs, empty documents,
binary garbage, truncation).  ``parse_config`` + ``build_graph`` must either
produce a valid graph (a DAG whose first stage is its only source) or raise
:class:`ConfigError` with a one-line message that starts with the file name;
any other exception is a bug in the loader.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.config import ConfigError, parse_config
from pipeline.graph import build_graph

ROOT = Path(__file__).resolve().parents[2]
PATH = "fuzz/pipelines.yaml"

SHIPPED = (ROOT / "pipelines.yaml").read_text(encoding="utf-8")

SMALL = """\
pipelines:
  p:
    description: list source into a sink
    stages:
      - name: src
        type: "pipeline.testing:ListSource"
        params: {count: 3, width: 32}
      - name: flaky
        type: "pipeline.testing:Fail"
        params:
          every: 2
        on_error: skip
      - name: sink
        type: "pipeline.testing:CollectSink"
"""

FAN = """\
pipelines:
  fan:
    description: fan-out and fan-in
    stages:
      - {name: src, type: decode, params: {loop: false, threads: 1}}
      - name: a
        type: "pipeline.testing:SleepInfer"
        params: &sleepy {ms: 1, requests: 2, label: a}
        inputs: [src]
      - name: b
        type: "pipeline.testing:SleepInfer"
        params: *sleepy
        inputs: [src]
      - name: join
        type: metadata
        inputs: [a, b]
        on_error: restart
      - name: encode
        type: encode
        params: {crf: 30, preset: ultrafast, fps: 10.0}
        inputs: [join]
"""

MODELS = """\
pipelines:
  faces:
    stages:
      - name: decode
        type: decode
        params:
          reconnect: {initial_s: 0.1, max_attempts: 3}
          transport: udp
      - name: det
        type: detect
        params: {model: mediapipe/face_detection_short_range, decoder: blazeface, every: 2, device: CPU}
      - name: mesh
        type: classify
        params: {model: mediapipe/face_landmark, decoder: face_landmarks, on: [face]}
  other:
    description: second pipeline
    stages:
      - name: decode
        type: decode
"""

SEEDS = [SHIPPED, SMALL, FAN, MODELS]

# Values of every YAML type (and some nasty ones) that replace scalars or become new keys.
NASTY_SCALARS = [
    "", "~", "null", "true", "no", "on", "0", "-1", "1e400", ".inf", ".nan", "0x1F", "0o17", "1_000",
    "[]", "{}", "[a, b]", "{a: 1}", "[[[[]]]]", "{x: {y: {z: [1, {w: 2}]}}}",
    "2001-12-14", "2001-12-14t21:59:43.10-05:00", "!!binary aGVsbG8=", "!!set {a, b}", "!!omap [a: 1]",
    "!!python/object:os.system ls", "!!str", "!!int abc", "!!float x", "!!null", "!!map []", "!!seq {}",
    "*nowhere", "&anchor", "&a [*a]", "&r {k: *r}", "<<: 5", "'unterminated", '"bad \\q escape"',
    '"\\x00\\x01"', "'a''b'", "|", ">-\n  folded", "?", "? complex\n: key", "- - -", ":", "::", "%", "@x",
    "`x`", "#comment", "a # trailing", "---", "...", "\t", "a\tb", "\u00e9\u00e8\u4e2d\u6587", "\U0001f600",
    "\u202e\u200b", "\ufeff", "\u2028", "a\x85b", "x" * 10_000, "9" * 400, "-" * 300,
    "pipeline.testing:Nope", "pipeline.testing:COLLECTED", "os:path", ":Foo", ".rel:X", "a..b:X",
    "pipeline.testing:", "no.such.module:X", "pipeline:testing", "decode", "detect", "encode",
    "/no/such/model.onnx", "a/b\nc", "~nouser/x", "/" + "d" * 5000 + "/m.onnx", "\x00",
]

KEYS = ["name", "type", "params", "inputs", "on_error", "stages", "description", "pipelines", "model",
        "decoder", "line", "__line__", "uri", "every", "requests", "path", "<<", "1", "null", "true", "[a]",
        "? x", "\u00fcml\u00e4ut", "k" * 500]

text_values = st.one_of(
    st.sampled_from(NASTY_SCALARS),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.booleans().map(str),
    st.text(max_size=40),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FF), max_size=30),
    st.lists(st.text(alphabet="abc:_- ", max_size=5), max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
    st.dictionaries(st.text(alphabet="abcxyz_", min_size=1, max_size=5), st.integers(-5, 5), max_size=3)
    .map(lambda d: "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(min_size=1, max_size=20))
garbage = st.binary(min_size=1, max_size=200).map(lambda b: b.decode("latin-1"))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


@st.composite
def mutation(draw: st.DrawFn, lines: list[str]) -> list[str]:
    """One random edit of ``lines`` (a new list)."""
    lines = list(lines)
    n = len(lines)
    idx = st.integers(0, max(0, n - 1))
    op = draw(st.sampled_from([
        "delete", "duplicate", "swap", "indent", "scalar", "scalar", "scalar", "key", "nest", "anchor",
        "alias", "merge", "tab", "document", "garbage", "truncate", "char", "unicode", "long", "flow",
    ]))
    if n == 0:
        return [draw(text_values)]
    i = draw(idx)
    line = lines[i]
    if op == "delete":
        del lines[i]
    elif op == "duplicate":
        lines.insert(i, line)
    elif op == "swap":
        j = draw(idx)
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "indent":
        delta = draw(st.integers(-6, 6))
        lines[i] = " " * max(0, _indent(line) + delta) + line.lstrip(" ")
    elif op == "scalar":
        # replace the value after "key:" (or a list item) by a value of another type
        head, sep, _ = line.partition(": ")
        if not sep:
            head, sep = (line.rstrip(), " ") if line.rstrip().endswith(":") else (line[:_indent(line)] + "-", " ")
        lines[i] = head + sep + draw(text_values)
    elif op == "key":
        depth = draw(st.sampled_from([0, 2, 4, 6, 8, 10, _indent(line)]))
        lines.insert(i, " " * depth + draw(keys) + ": " + draw(text_values))
    elif op == "nest":
        # wrong nesting: push a block one level deeper or wrap a value in a list / mapping
        how = draw(st.sampled_from(["deeper", "list", "map", "item"]))
        if how == "deeper":
            for k in range(i, min(n, i + draw(st.integers(1, 6)))):
                lines[k] = "  " + lines[k]
        elif how == "list":
            head, sep, value = line.partition(": ")
            lines[i] = head + sep + "[" + value + "]" if sep else "- " + line
        elif how == "map":
            head, sep, value = line.partition(": ")
            lines[i] = head + sep + "{x: " + value + "}" if sep else line + ":"
        else:
            lines[i] = " " * _indent(line) + "- " + line.lstrip(" ")
    elif op == "anchor":
        head, sep, value = line.partition(": ")
        lines[i] = head + sep + "&" + draw(st.sampled_from(["a", "b", "x"])) + " " + value if sep else line
    elif op == "alias":
        head, sep, _ = line.partition(": ")
        lines[i] = (head + sep if sep else line[:_indent(line)] + "- ") + "*" + draw(st.sampled_from(["a", "b", "x"]))
    elif op == "merge":
        lines.insert(i, " " * _indent(line) + "<<: *" + draw(st.sampled_from(["a", "b", "x"])))
    elif op == "tab":
        k = _indent(line)
        lines[i] = "\t" * draw(st.integers(1, 2)) + line[k:] if k else "\t" + line
    elif op == "document":
        what = draw(st.sampled_from(["empty", "sep", "end", "split", "directive", "comments"]))
        if what == "empty":
            return []
        if what == "sep":
            lines.insert(i, "---")
        elif what == "end":
            lines.insert(i, "...")
        elif what == "split":
            lines = lines[:i] + ["---"] + lines
        elif what == "directive":
            lines.insert(0, draw(st.sampled_from(["%YAML 1.1", "%YAML 2.0", "%TAG ! tag:x,2000:", "%FOO"])))
            lines.insert(1, "---")
        else:
            return ["# only a comment", "", "   "]
    elif op == "garbage":
        pos = draw(st.integers(0, len(line)))
        lines[i] = line[:pos] + draw(garbage) + line[pos:]
    elif op == "truncate":
        text = "\n".join(lines)
        return text[:draw(st.integers(0, len(text)))].split("\n")
    elif op == "char":
        pos = draw(st.integers(0, len(line)))
        ch = draw(st.sampled_from(list(":-[]{}&*!|>'\"%@`#?,\\ \t")))
        lines[i] = line[:pos] + ch + line[pos + 1:] if draw(st.booleans()) else line[:pos] + ch + line[pos:]
    elif op == "unicode":
        pos = draw(st.integers(0, len(line)))
        lines[i] = line[:pos] + draw(st.text(min_size=1, max_size=10)) + line[pos:]
    elif op == "long":
        head, sep, _ = line.partition(": ")
        lines[i] = (head + sep if sep else line + ": ") + draw(st.sampled_from(["y" * 100_000, "é" * 20_000,
                                                                                 "[" * 60 + "]" * 60]))
    elif op == "flow":
        # a whole stage written as a flow mapping with random content
        lines.insert(i, " " * _indent(line) + "- {name: " + draw(text_values).replace("\n", " ")
                     + ", type: " + draw(st.sampled_from(["decode", "detect", "encode", "metadata", "x:y",
                                                          "pipeline.testing:CollectSink"])) + "}")
    return lines


@st.composite
def fuzzed_files(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(SEEDS)).split("\n")
    for _ in range(draw(st.integers(1, 5))):
        lines = draw(mutation(lines))
    return "\n".join(lines)


def check_loader(text: str) -> None:
    """The property: a valid graph, or a one-line ConfigError starting with the file name."""
    try:
        cfg = parse_config(text, PATH)
        graphs = [build_graph(spec, PATH) for spec in cfg.pipelines.values()]
    except ConfigError as exc:
        msg = str(exc)
        assert len(msg.splitlines()) == 1, f"message is not one line: {msg!r}"
        assert msg.startswith(PATH), f"message does not start with the file name: {msg!r}"
        return
    for g in graphs:
        assert nx.is_directed_acyclic_graph(g.graph)
        assert sorted(g.order) == sorted(s.name for s in g.spec.stages)
        sources = [n for n in g.order if g.graph.nodes[n]["cls"].kind == "source"]
        assert sources == [g.order[0]], (sources, g.order)
        assert g.graph.in_degree(g.source) == 0
        assert all(g.graph.in_degree(n) > 0 for n in g.order[1:])
        position = {n: k for k, n in enumerate(g.order)}
        assert all(position[a] < position[b] for a, b in g.graph.edges)


def test_seeds_are_valid() -> None:
    for seed in SEEDS:
        cfg = parse_config(seed, PATH, check_files=False)  # models users bring may be missing here
        assert cfg.pipelines
        for spec in cfg.pipelines.values():
            build_graph(spec, PATH)


FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(fuzzed_files())
@example("")
@example("---\n...\n---\n")
@example("pipelines:\n" + "  " * 2 + "[" * 5000 + "]" * 5000)
@example("pipelines: {p: {stages: [{name: a, type: decode, params: " + "{a: " * 400 + "1" + "}" * 400 + "}]}}")
@example("\x00\x01\x02binary\xff\xfe")
@example("pipelines: &a {p: *a}")
@example("pipelines: {p: {stages: [{name: a, type: decode, params: {x: &l [*l]}}]}}")
@example("pipelines: {p: {stages: &l [{name: a, type: decode, params: {x: *l}}]}}")
@example("!!int abc")
@example("pipelines: {p: {description: !!bool x}}")
@example("pipelines: {p: {stages: [{name: !!int , type: decode}]}}")
@example("pipelines: {p: {stages: [{name: a, type: decode, params: {fps: !!timestamp 2020-13-45}}]}}")
@example("pipelines:\n  p:\n    stages:\n      - {name: s, type: ':Foo'}")
@example("pipelines:\n  p:\n    stages:\n      - {name: s, type: '.rel:Foo'}")
@example("pipelines:\n  p:\n    stages:\n      - {name: s, type: decode, 1: x}")
@example("pipelines:\n  p:\n    stages:\n      - {name: s, type: decode, line: 3}")
@example('pipelines:\n  p:\n    stages:\n      - {name: s, type: detect, params: {model: "a/b\\nc", decoder: pose}}')
@example("pipelines:\n  p:\n    stages:\n      - {name: s, type: detect, params: {model: /" + "d" * 5000
         + "/m.onnx, decoder: pose}}")
def test_mutated_pipeline_files_load_or_fail_in_one_line(text: str) -> None:
    check_loader(text)


@FUZZ
@given(st.one_of(st.text(max_size=400), garbage, st.binary(max_size=300).map(lambda b: b.decode("utf-8", "replace"))))
def test_arbitrary_text_loads_or_fails_in_one_line(text: str) -> None:
    check_loader(text)


@pytest.mark.parametrize("seed", range(len(SEEDS)))
def test_every_line_deleted_once(seed: int) -> None:
    """Deterministic sweep: each seed with each single line removed."""
    lines = SEEDS[seed].split("\n")
    for i in range(len(lines)):
        check_loader("\n".join(lines[:i] + lines[i + 1:]))
