"""Known speakers named: each clustered speaker matched to the caller's reference voices.

A reference's voice is the mean embedding of its clips; a speaker's, the mean of its own.
The most alike speaker and reference are paired first, then the next most alike among those
left, while they are at least ``SAME_VOICE`` alike (cosine): a reference matches one speaker
at most, and a speaker whom no reference matches keeps its letter. Pure numpy.

``SAME_VOICE`` was chosen on the tuning speakers' conversations (``bench/voices.py``, 80 of
them, every voice named from its reference: another stretch of the person's speech): 0.40
to 0.55 named 97.8% of the speech right, 0.60 96.8%, 0.65 92.8% (docs/logs/
diarization-tuning.log); it sits in the middle of the best. Pairing the most alike first
keeps a reference from naming another voice when its own is there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from asrserve.speakers.cluster import cosine

SAME_VOICE = 0.45

Floats = npt.NDArray[np.float32]


def name_speakers(
    embeddings: Floats, labels: npt.NDArray[np.int64], references: Sequence[tuple[str, Floats]]
) -> dict[int, str]:
    """Speaker index → the name of the reference it matches (``references``: each name with
    its clips' embeddings)."""
    if not references or len(labels) == 0:
        return {}
    speakers = sorted(set(labels.tolist()))
    voices = np.stack([embeddings[labels == s].mean(axis=0) for s in speakers])
    known = np.stack([clips.mean(axis=0) for _, clips in references])
    alike = cosine(voices, known)
    names: dict[int, str] = {}
    while alike.size and alike.max() >= SAME_VOICE:
        row, column = np.unravel_index(int(np.argmax(alike)), alike.shape)
        names[speakers[int(row)]] = references[int(column)][0]
        alike[row, :] = -np.inf
        alike[:, column] = -np.inf
    return names
