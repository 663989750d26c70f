"""The worker nodes' scheduler views as one: what an API node's dashboard shows."""

from __future__ import annotations

from typing import Any

SUMMED = (
    *("batches", "items", "dropped", "audio_seconds", "padded_frames", "total_frames"),
    *("pending_chunks", "jobs_in_flight"),
)
MERGED = (
    *("batch_sizes", "queued_items", "queued_audio_seconds", "pending_by_window"),
    "cpu_seconds",
)
PER_DEVICE = ("device_busy_seconds", "device_busy_fraction")
SHARED = ("policy", "max_batch_size", "max_wait_ms", "encoder_window", "encoder_windows_s")


def merge(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The worker nodes' scheduler views as one (what the dashboard shows): counts summed,
    devices named ``node/device``, means recomputed from the sums."""
    view: dict[str, Any] = {key: reports[0][key] for key in SHARED if reports and key in reports[0]}
    for key in SUMMED:
        view[key] = sum(r.get(key, 0) for r in reports)
    for key in MERGED:
        totals: dict[str, float] = {}
        for report in reports:
            for label, value in report.get(key, {}).items():
                totals[label] = totals.get(label, 0) + value
        view[key] = dict(sorted(totals.items(), key=lambda item: _label_order(item[0])))
    for key in PER_DEVICE:
        view[key] = {f"{r['node']}/{d}": v for r in reports for d, v in r.get(key, {}).items()}
    view["devices"] = list(view["device_busy_seconds"])
    items, batches = view["items"], view["batches"]
    waited = sum(r.get("mean_queue_wait_s", 0.0) * r.get("items", 0) for r in reports)
    view["mean_batch_size"] = items / batches if batches else 0.0
    view["mean_queue_wait_s"] = waited / items if items else 0.0
    frames = view["total_frames"]
    view["padding_waste"] = round(view["padded_frames"] / frames, 4) if frames else 0.0
    busy, audio = sum(view["device_busy_seconds"].values()), view["audio_seconds"]
    view["device_s_per_audio_s"] = round(busy / audio, 4) if audio else None
    return view


def _label_order(label: str) -> tuple[float, str]:
    """Numeric labels ("16", "5s") in numeric order."""
    try:
        return float(label.rstrip("s")), label
    except ValueError:
        return float("inf"), label
