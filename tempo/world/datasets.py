"""Request datasets for ``serve-bench`` (paper Sections 5.8-5.15): convert GovReport, OASST1
and GSM8K files you downloaded into the ShareGPT JSON that SGLang's serving benchmark reads
with ``--dataset sharegpt --dataset-path FILE``.

ShareGPT format: a JSON list of ``{"id", "conversations": [{"from": "human", "value": prompt},
{"from": "gpt", "value": answer}]}``; the benchmark takes the first turn as the prompt and the
second as the reference completion, whose length sets the output length.

Inputs, one JSON object per line (JSONL, as the datasets' hubs export them):

* GovReport: ``report`` and ``summary`` (summarization: the report is the prompt);
* GSM8K: ``question`` and ``answer``;
* OASST1: messages with ``message_id``, ``parent_id``, ``role`` (``prompter`` /
  ``assistant``) and ``text``; each root prompt paired with its assistant replies.
"""
from __future__ import annotations

import json
from pathlib import Path

GOVREPORT_PROMPT = "Summarize the following report.\n\n{report}"


def sharegpt(pairs) -> list[dict]:
    """(prompt, answer) pairs as ShareGPT conversations."""
    return [{"id": str(i), "conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": a}]}
            for i, (q, a) in enumerate(pairs)]


def _need(row: dict, keys, name: str):
    if not isinstance(row, dict):
        raise ValueError(f"{name} record must be a JSON object, got {type(row).__name__}")
    missing = [k for k in keys if k not in row]
    if missing:
        raise ValueError(f"{name} record lacks field(s) {missing}; has {sorted(row)}")


def govreport(rows) -> list[dict]:
    out = []
    for r in rows:
        _need(r, ("report", "summary"), "GovReport")
        out.append((GOVREPORT_PROMPT.format(report=r["report"]), r["summary"]))
    return sharegpt(out)


def gsm8k(rows) -> list[dict]:
    out = []
    for r in rows:
        _need(r, ("question", "answer"), "GSM8K")
        out.append((r["question"], r["answer"]))
    return sharegpt(out)


def oasst1(rows) -> list[dict]:
    rows = list(rows)
    for r in rows:
        _need(r, ("message_id", "parent_id", "role", "text"), "OASST1")
    by_id = {r["message_id"]: r for r in rows}
    return sharegpt((by_id[r["parent_id"]]["text"], r["text"]) for r in rows
                    if r["role"] == "assistant" and r["parent_id"] in by_id and by_id[r["parent_id"]]["parent_id"] is None)


CONVERTERS = {"govreport": govreport, "gsm8k": gsm8k, "oasst1": oasst1}


#: the most bytes a dataset file may hold, on disk and inflated
MAX_SOURCE_BYTES = 2**31


def convert(name: str, src, dst) -> int:
    """Convert the JSONL file ``src`` of dataset ``name`` into ShareGPT JSON at ``dst``;
    returns the number of conversations written."""
    if name not in CONVERTERS:
        raise ValueError(f"dataset must be one of {', '.join(CONVERTERS)}, got {name!r}")
    from ..core.io import BadInput, loads_json, read_maybe_gz

    data = read_maybe_gz(src, MAX_SOURCE_BYTES, str(src), follow=True)  # a regular file, size capped
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{src} is not UTF-8 text ({exc})") from None
    rows = [loads_json(line, f"{src} line {i}") for i, line in enumerate(text.split("\n"), 1) if line.strip()]
    conv = CONVERTERS[name](rows)
    Path(dst).write_text(json.dumps(conv))
    return len(conv)
