"""The Wyoming protocol edge: Home Assistant's speech-to-text over TCP, beside HTTP.

``server.py`` listens and stops in two phases, ``handler.py`` runs one connection's events
(``describe``, ``transcribe``, ``audio-start``/``-chunk``/``-stop``), ``framing.py`` reads
events within bounds, ``utterance.py`` gathers the audio as 16 kHz mono, ``describe.py``
answers ``info``. An utterance is submitted through :class:`asrserve.service.jobs.Service`
at interactive priority, as a synchronous HTTP request is (docs/wyoming.md).
"""
