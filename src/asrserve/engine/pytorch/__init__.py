"""The ``transformers`` engine: Whisper on PyTorch (transformers' model definition), for the
devices CTranslate2 cannot run (CUDA 13, Blackwell, ROCm, Apple MPS) and on the CPU too.

Nothing here is imported until the engine is asked for (``engine/registry.py``); torch and
transformers are the ``transformers`` extra.
"""

import os

# PyTorch's OpenMP threads wait for work without spinning: on CPU cores shared with the
# preprocessing pool, other replicas and other processes, spinning threads wait for each
# other (measured on 2 busy cores, 2 threads: a 0.73 s decode took 8.4 s spinning). Read
# once, when torch is first imported (it is imported in this package only); a value set
# by the user stands.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
