"""``scripts/gpu_check.sh pack``, run here: the GPU check's payload, cut into stages.

The models as the service resolves them (``tiny.en``, ``base``: the packaged ones; or any
model name or CTranslate2 directory), as int8; the real recordings of
``tests/support/real_speech.py`` (LibriVox's sentences, ``tests/data/jfk.flac`` and
Asterisk's prompts in English, and in Spanish, French, Italian and Russian when a model is
multilingual); and the wheels the GPU machine lacks (``asrserve.bench.gpu.wheels``), fetched
once into ``OUT/wheels``. Prints each stage's size with the device tool's call for it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.real_speech import librivox, prompts  # noqa: E402

from asrserve.bench.gpu.clips import Clip  # noqa: E402
from asrserve.bench.gpu.pack import CALL_LIMIT, PackConfig, calls, mib, pack  # noqa: E402
from asrserve.bench.gpu.wheels import download, pinned  # noqa: E402
from asrserve.engine.loading import vocabulary_size  # noqa: E402
from asrserve.engine.model_dirs import MULTILINGUAL_VOCABULARY  # noqa: E402
from asrserve.engine.sources import resolve  # noqa: E402
from asrserve.settings import Settings  # noqa: E402

REAL_SPEECH = ROOT / "tests" / "data"
OTHER_LANGUAGES = ("es", "fr", "it", "ru")


def tree_bytes() -> int:
    """What the device tool carries of the repository: tracked and untracked, unignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    files = (ROOT / name for name in listed.split("\0") if name)
    return sum(path.stat().st_size for path in files if path.is_file())


def recordings(count: int, long: bool, multilingual: bool) -> list[Clip]:
    """``count`` prompts per language; with ``long``, LibriVox's sentences and jfk too."""
    languages = ("en", *OTHER_LANGUAGES) if multilingual else ("en",)
    chosen = [Clip(r.path, r.language, r.text) for r in prompts(count, languages)]
    if long:
        chosen += [Clip(r.path, r.language, r.text) for r in librivox()]
        texts = json.loads((REAL_SPEECH / "references.json").read_text(encoding="utf-8"))
        chosen.append(Clip(REAL_SPEECH / "jfk.flac", "en", texts["jfk.flac"]))
    return chosen


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu")
    parser.add_argument("--models", default="tiny.en,base")
    parser.add_argument("--prompts", type=int, default=24, help="per language")
    parser.add_argument("--no-long", action="store_true", help="no LibriVox, no jfk")
    parser.add_argument("--no-wheels", action="store_true", help="(a dry run on this machine)")
    parser.add_argument("--limit-mib", type=float, default=CALL_LIMIT / 2**20)
    parser.add_argument("--model-cache", type=Path, default=None)
    return parser.parse_args()


def main() -> int:
    args = arguments()
    cache = args.model_cache or Settings().model_cache
    models = {
        source.id: source.path
        for name in args.models.split(",")
        for source in [resolve(name.strip(), cache_dir=cache, offline=False)]
    }
    multilingual = any(vocabulary_size(p) >= MULTILINGUAL_VOCABULARY for p in models.values())
    wheels = []
    if not args.no_wheels:
        wheels = download(pinned(ROOT), args.out / "wheels")
    config = PackConfig(
        out=args.out,
        models=models,
        clips=recordings(args.prompts, not args.no_long, multilingual),
        wheels=wheels,
        tree=tree_bytes(),
        limit=int(args.limit_mib * 2**20),
    )
    manifest = pack(config)
    total = sum(manifest.stage_bytes())
    print(f"gpu check: {len(manifest.files)} files, {mib(total)}, in {len(manifest.stages)}")
    print(f"stages of at most {mib(config.budget)} (the call's limit less the tree):")
    print("\n".join(calls(manifest, os.path.relpath(args.out, ROOT))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
