"""Where the cores go: a process's threads' CPU by group (inference/cpu_split.py) and the
bench's cores per group over a row (bench/cpu_split.py)."""

from __future__ import annotations

import hashlib
import threading

from asrserve.bench.cpu_split import CLIENT, split
from asrserve.inference.cpu_split import ENGINE, cpu_seconds, group

PREPROCESSING = "preprocessing (decode, VAD, features)"


def test_threads_python_did_not_start_are_the_engines() -> None:
    assert (group(None), group("preprocess_3"), group("device-cpu0")) == (
        ENGINE,
        PREPROCESSING,
        "device threads (engine calls)",
    )


def test_a_threads_cpu_counts_in_its_group_while_it_lives() -> None:
    worked, done = threading.Event(), threading.Event()

    def work() -> None:
        digest = b""
        for _ in range(200_000):  # CPU work, measured in ticks of 10 ms
            digest = hashlib.sha256(digest).digest()
        worked.set()
        done.wait(10)

    before = cpu_seconds().get(PREPROCESSING, 0.0)
    thread = threading.Thread(target=work, name="preprocess_test")
    thread.start()
    worked.wait(60)
    after = cpu_seconds().get(PREPROCESSING, 0.0)
    done.set()
    thread.join()
    assert after > before


def test_the_bench_divides_each_groups_seconds_by_the_rows_wall() -> None:
    before = {"cpu_seconds": {ENGINE: 10.0, PREPROCESSING: 2.0}}
    after = {"cpu_seconds": {ENGINE: 30.0, PREPROCESSING: 6.0}}
    assert split(before, after, wall=10.0, client_cpu=0.5) == {
        ENGINE: 2.0,
        PREPROCESSING: 0.4,
        CLIENT: 0.05,
    }
