"""The run's JSON in a few lines, for the device tool's output."""

from __future__ import annotations

from typing import Any

from asrserve.bench.gpu.judge import reason


def mib(value: float | None) -> str:
    return "–" if value is None else f"{value / 2**20:.0f} MiB"


def curve_lines(result: dict[str, Any]) -> list[str]:
    reference = result["reference"]
    lines = [f"   float32 reference (batch 1, {reference['from']}): WER {reference['wer']}"]
    for dtype, measured in result["dtypes"].items():
        rows = ", ".join(
            f"b{row['batch_size']} {row['audio_s_per_s']:.0f} s/s {mib(row['peak_bytes'])}"
            f" WER {row['wer']}"
            for row in measured["rows"]
        )
        known = measured["known"]
        lines.append(f"   {dtype}: {rows}; {known['clip']} WER {known['wer']}")
    return lines


def service_lines(result: dict[str, Any]) -> list[str]:
    load = result["load"]
    wers = ", ".join(f"{code} {row['wer']}" for code, row in result["wer_by_language"].items())
    lone = result["lone"]
    same = sum(clip["same"] for clip in result["engine_answers"]["clips"])
    return [
        f"   {result['policy']}, {result['clients']} clients: {load['audio_s_per_s']} audio s/s,"
        f" p50 {load['p50_s']} s, p95 {load['p95_s']} s, {load['errors']} errors, mean batch"
        f" {load['mean_batch_size']}, GPU memory peak {mib(result['gpu_memory_used_peak_bytes'])}",
        f"   1 client: p50 {lone['p50_s']} s, p95 {lone['p95_s']} s, {lone['errors']} errors;"
        f" {same} of {len(result['engine_answers']['clips'])} answers the engine's own",
        f"   WER: {wers}",
    ]


def machine_lines(result: dict[str, Any]) -> list[str]:
    failed = [name for name, why in result["imports"].items() if why]
    versions = ", ".join(f"{key} {value}" for key, value in result["versions"].items())
    return [f"   {result['gpus']} {result['torch']}; not importable: {failed}", f"   {versions}"]


def summary(body: dict[str, Any]) -> list[str]:
    lines = [f"gpu check: {body['wall_s']} s"]
    for step in body["steps"]:
        judgements = step.get("judgements", [])
        passed = sum(j["passed"] for j in judgements)
        judged = f" ({passed} of {len(judgements)} judgements passed)" if judgements else ""
        lines.append(f"{step['name']}: {step['status']}{judged}")
        lines += [f"   FAILED {reason(j)}" for j in judgements if not j["passed"]]
        result = step.get("result")
        if not result or "skipped" in result or not judgements:
            if step.get("error") and not judgements:
                lines.append("   " + step["error"].strip().splitlines()[-1][:300])
            continue
        detail = {"curve": curve_lines, "service": service_lines, "machine": machine_lines}
        try:
            lines += detail[step["kind"]](result)
        except KeyError:  # a result without what the summary reads: the JSON has it as it is
            lines.append("   (its result lacks what the summary reads)")
    return lines
