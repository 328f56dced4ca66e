"""Pipeline specs -> a ``networkx.DiGraph`` of stages (definition only).

Building a graph resolves stage classes and validates parameters but opens
nothing: no model is read, no device touched.  The runtime instantiates the
stages per camera from :meth:`PipelineGraph.instantiate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx

from .config import ConfigError, PipelineSpec
from .registry import resolve_stage_type
from .stage import Stage

__all__ = ["PipelineGraph", "build_graph", "FORMATS"]

FORMATS = ("text", "mermaid", "dot")


@dataclass
class PipelineGraph:
    spec: PipelineSpec
    graph: nx.DiGraph
    order: list[str]

    @property
    def source(self) -> str:
        return self.order[0]

    def classes(self) -> dict[str, type[Stage]]:
        return {n: self.graph.nodes[n]["cls"] for n in self.order}

    def instantiate(self, overrides: dict[str, dict[str, Any]] | None = None) -> dict[str, Stage]:
        """Fresh stage objects (one set per camera), in topological order."""
        out: dict[str, Stage] = {}
        for n in self.order:
            data = self.graph.nodes[n]
            params = {**data["spec"].params, **((overrides or {}).get(n, {}))}
            out[n] = data["cls"](data["cls"].Params(**params), name=n)
        return out

    def render(self, fmt: str = "text") -> str:
        if fmt not in FORMATS:
            raise ValueError(f"unknown graph format {fmt!r}; valid: {', '.join(FORMATS)}")
        g = self.graph
        if fmt == "mermaid":
            lines = ["flowchart LR"]
            lines += [f'    {n}["{n}<br/>{g.nodes[n]["spec"].type}"]' for n in self.order]
            lines += [f"    {a} --> {b}" for a, b in g.edges]
            return "\n".join(lines)
        if fmt == "dot":
            lines = [f'digraph "{self.spec.name}" {{', "    rankdir=LR;"]
            lines += [f'    "{n}" [label="{n}\\n{g.nodes[n]["spec"].type}"];' for n in self.order]
            lines += [f'    "{a}" -> "{b}";' for a, b in g.edges]
            return "\n".join(lines + ["}"])
        lines = [f"{self.spec.name}: {self.spec.description}".rstrip(": ")]
        for n in self.order:
            preds = list(g.predecessors(n))
            arrow = f"  <- {', '.join(preds)}" if preds else ""
            lines.append(f"  {n} [{g.nodes[n]['spec'].type}]{arrow}")
        return "\n".join(lines)


def build_graph(spec: PipelineSpec, path: str = "<string>") -> PipelineGraph:
    """Validate the topology: one source first, known inputs, no cycles."""
    g = nx.DiGraph()
    names = [s.name for s in spec.stages]
    for st in spec.stages:
        g.add_node(st.name, spec=st, cls=resolve_stage_type(st.type))
    prev: str | None = None
    for st in spec.stages:
        inputs = st.inputs if st.inputs is not None else ([prev] if prev else [])
        for src in inputs:
            if src not in g:
                raise ConfigError(f"{path}:{st.line}: pipeline {spec.name!r} stage {st.name!r}: input {src!r} is not "
                                  f"a stage; stages: {', '.join(names)}")
            if src == st.name:
                raise ConfigError(f"{path}:{st.line}: pipeline {spec.name!r} stage {st.name!r} reads from itself")
            g.add_edge(src, st.name)
        prev = st.name
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        path_str = " -> ".join([a for a, _ in cycle] + [cycle[0][0]])
        raise ConfigError(f"{path}:{spec.line}: pipeline {spec.name!r} has a cycle: {path_str}")
    sources = [n for n in g if g.nodes[n]["cls"].kind == "source"]
    if len(sources) != 1:
        raise ConfigError(f"{path}:{spec.line}: pipeline {spec.name!r} needs exactly one source stage (e.g. type: "
                          f"decode); found {len(sources)}: {', '.join(sources) or 'none'}")
    roots = [n for n in g if g.in_degree(n) == 0]
    if roots != sources:
        bad = [n for n in roots if n not in sources] or [n for n in sources if g.in_degree(n)]
        raise ConfigError(f"{path}:{spec.line}: pipeline {spec.name!r}: stage {bad[0]!r} has no input; every "
                          f"stage except the source {sources[0]!r} must read from another stage")
    _check_joined_views(g, spec, path)
    order = list(nx.lexicographical_topological_sort(g, key=names.index))
    return PipelineGraph(spec=spec, graph=g, order=order)


def _check_joined_views(g: nx.DiGraph, spec: PipelineSpec, path: str) -> None:
    """A stage with several inputs merges results on one frame object, so every input must
    come through the same stages that hand on new frames (``makes_views``, e.g. preprocess):
    otherwise the branches' detections would be in different pixels and one would be lost."""
    for name in g:
        if g.in_degree(name) < 2:
            continue
        seen = {frozenset(a for a in nx.ancestors(g, p) | {p} if getattr(g.nodes[a]["cls"], "makes_views", False))
                for p in g.predecessors(name)}
        if len(seen) > 1:
            views = sorted(set().union(*seen) - set.intersection(*map(set, seen)))
            line = g.nodes[name]["spec"].line
            raise ConfigError(f"{path}:{line}: pipeline {spec.name!r} stage {name!r} joins branches that differ in "
                              f"the view stage(s) {', '.join(views)}; put them before the branches split")
