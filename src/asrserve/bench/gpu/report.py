"""The run's JSON in a few lines, for the device tool's output."""

from __future__ import annotations

from typing import Any


def mib(value: float | None) -> str:
    return "–" if value is None else f"{value / 2**20:.0f} MiB"


def curve_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    for dtype, measured in result["dtypes"].items():
        rows = ", ".join(
            f"b{row['batch_size']} {row['audio_s_per_s']:.0f} s/s {mib(row['peak_bytes'])}"
            for row in measured["rows"]
        )
        lines.append(f"   {dtype}: {rows}; WER {measured['rows'][-1]['wer']}")
    return lines


def service_lines(result: dict[str, Any]) -> list[str]:
    load = result["load"]
    wers = ", ".join(f"{code} {row['wer']}" for code, row in result["wer_by_language"].items())
    lone = result["lone"]
    return [
        f"   {result['policy']}, {result['clients']} clients: {load['audio_s_per_s']} audio s/s,"
        f" p50 {load['p50_s']} s, p95 {load['p95_s']} s, {load['errors']} errors, mean batch"
        f" {load['mean_batch_size']}, GPU memory peak {mib(result['gpu_memory_used_peak_bytes'])}",
        f"   1 client: p50 {lone['p50_s']} s, p95 {lone['p95_s']} s, {lone['errors']} errors",
        f"   WER: {wers}",
    ]


def summary(body: dict[str, Any]) -> list[str]:
    lines = [f"gpu check: {body['wall_s']} s"]
    for step in body["steps"]:
        lines.append(f"{step['name']}: {step['status']}")
        result = step.get("result")
        if step["status"] != "ok" or not result:
            if step.get("error"):
                lines.append("   " + step["error"].strip().splitlines()[-1][:300])
            continue
        if step["kind"] == "curve":
            lines += curve_lines(result)
        elif step["kind"] == "service":
            lines += service_lines(result)
        else:
            failed = [name for name, why in result["imports"].items() if why]
            lines.append(f"   {result['gpus']} {result['torch']}; not importable: {failed}")
    return lines
