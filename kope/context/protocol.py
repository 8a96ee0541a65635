"""The response protocol every proposer follows, and its robust parser.

A response is a short decision header, then exactly one fenced code block with
the full candidate file::

    DECISION
    title: Vectorize the row loop with AVX2 and split rows across threads
    layer: vectorization
    rationale: rows are contiguous; 8-wide FMA halves the inner loop ...
    evidence: D-1a2b3c, I-9f8e7d
    END DECISION

    ```python
    import torch
    ...
    class ModelNew(torch.nn.Module):
        ...
    ```

The parser accepts the common ways models bend this (markdown bold or
headings around the keys, any key case, a missing END line, several code
blocks of which one defines ``ModelNew``, an unlabelled fence). What it cannot
use becomes a :class:`FormatProblem` with a short kind (``no_code``,
``no_model_new``, ``several_candidates``, ``empty``), which the loop records as
a ``format_error`` outcome: never a crash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kope.boundary import LAYERS

# What models write instead of a layer name of the vocabulary (harness.vocabulary.LAYERS).
_LAYER_ALIASES = {
    "parallelism": "parallelization",
    "threading": "parallelization",
    "openmp": "parallelization",
    "blocking": "tiling",
    "cache_blocking": "tiling",
    "simd": "vectorization",
    "layout": "memory_layout",
    "memory": "memory_layout",
    "data_layout": "memory_layout",
    "kernel_fusion": "fusion",
    "algorithmic": "algorithm",
    "intrinsics": "instruction",
    "instructions": "instruction",
    "loop_unrolling": "unrolling",
    "unroll": "unrolling",
}

PROTOCOL_TEXT = """Answer in exactly this format, nothing before it:

DECISION
title: <one line: what you change>
layer: <one of: {layers}>
rationale: <2-5 sentences: why this should be faster or fix the failure, citing evidence>
evidence: <comma-separated ids of the context items you relied on, e.g. D-1a2b3c, I-4d5e6f; or none>
END DECISION

```python
<the complete candidate file: imports, kernel source, and class ModelNew with the same constructor signature as Model>
```
""".format(layers=", ".join(LAYERS))


@dataclass(frozen=True)
class ProposedDecision:
    title: str
    layer: str
    rationale: str
    evidence: tuple[str, ...]
    code: str
    warnings: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class FormatProblem:
    kind: str  # no_code | no_model_new | several_candidates | empty
    message: str
    title: str | None = None
    layer: str | None = None
    rationale: str | None = None

    @property
    def error_kind(self) -> str:
        return f"format_error:{self.kind}"


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:\n```|\Z)", re.DOTALL)
_KEY = re.compile(
    r"^[\s>*#_-]*\**\s*(title|layer|optimization[ _]layer|rationale|reason|thought|evidence|evidence[ _]ids)\s*\**\s*[:：]\s*\**\s*(.*)$",
    re.IGNORECASE,
)


def normalize_layer(value: str | None) -> tuple[str, str | None]:
    """(layer, warning or None): unknown layers become 'other' with a warning."""
    raw = (value or "").strip().strip("*`").lower().replace("-", "_").replace(" ", "_")
    if raw in LAYERS:
        return raw, None
    if raw in _LAYER_ALIASES:
        return _LAYER_ALIASES[raw], None
    return "other", (f"unknown layer {value!r} recorded as 'other'" if raw else "no layer given; recorded as 'other'")


def _header(text: str) -> dict[str, str]:
    """Key/value lines before the first code fence; continuation lines extend the last key."""
    head = text.split("```", 1)[0]
    values: dict[str, str] = {}
    last: str | None = None
    for line in head.splitlines():
        stripped = line.strip()
        if re.fullmatch(r"[#*\s]*(END\s+)?DECISION[:*\s]*", stripped, re.IGNORECASE):
            last = None
            continue
        match = _KEY.match(line)
        if match:
            key = match.group(1).lower().replace(" ", "_")
            key = {
                "optimization_layer": "layer",
                "reason": "rationale",
                "thought": "rationale",
                "evidence_ids": "evidence",
            }.get(key, key)
            values[key] = match.group(2).strip().rstrip("*").strip()
            last = key
        elif last == "rationale" and stripped:
            values[last] += " " + stripped
    return values


def _evidence(value: str | None) -> tuple[str, ...]:
    if not value or value.strip().lower() in ("none", "-", "n/a", "[]"):
        return ()
    ids = [part.strip(" `*[]'\"") for part in re.split(r"[,\s;]+", value)]
    seen: list[str] = []
    for item in ids:
        if item and item.lower() != "none" and item not in seen:
            seen.append(item)
    return tuple(seen)


def parse_response(text: str | None) -> ProposedDecision | FormatProblem:
    if not text or not text.strip():
        return FormatProblem("empty", "the response was empty")
    header = _header(text)
    title = header.get("title") or None
    layer, layer_warning = normalize_layer(header.get("layer"))
    rationale = header.get("rationale") or None
    blocks = [(lang.lower(), body.strip("\n")) for lang, body in _FENCE.findall(text)]
    code_blocks = [body for lang, body in blocks if lang in ("", "python", "py", "python3") and body.strip()]
    if not code_blocks:
        return FormatProblem("no_code", "the response holds no ```python code block", title, layer, rationale)
    candidates = [body for body in code_blocks if re.search(r"^\s*class\s+ModelNew\b", body, re.MULTILINE)]
    if not candidates:
        return FormatProblem("no_model_new", "no code block defines class ModelNew", title, layer, rationale)
    if len(candidates) > 1 and len(set(candidates)) > 1:
        return FormatProblem(
            "several_candidates",
            f"{len(candidates)} different code blocks define ModelNew; send exactly one",
            title,
            layer,
            rationale,
        )
    warnings = [w for w in (layer_warning,) if w]
    if not title:
        warnings.append("no title given")
        title = "untitled decision"
    return ProposedDecision(
        title=title[:200],
        layer=layer,
        rationale=(rationale or "")[:4000],
        evidence=_evidence(header.get("evidence")),
        code=candidates[0].rstrip() + "\n",
        warnings=tuple(warnings),
    )
