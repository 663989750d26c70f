"""Whisper's searches over a batch of windows, each after its own prompt: greedy at
temperature 0 with a beam of one; beam search as openai-whisper and CTranslate2 run it (the
best by log probability over length of beam size × patience finished hypotheses); above
temperature 0, the best of ``best_of`` samples.

A window takes ``width`` rows of the batch (its beams or samples). Every row runs the same
steps; a window whose search is over leaves the batch, so short windows stop costing
anything once done. The log probabilities scored and reported are those of the distribution
a token was chosen from, after Whisper's rules (``rules.py``) and before any temperature,
as Whisper scores its decodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from asrserve.engine.pytorch.network import Cross, WhisperNet
from asrserve.engine.pytorch.rules import TimestampRules

Tensor = torch.Tensor
COMPACT_AT = 0.75  # the share of a batch's windows still searching at which the rest leave
SAMPLING_SEED = 0  # the seed of every search's own generator (``Searcher._sampled``)
Pick = tuple[int, int]  # (the parent row within its window, the token fed to the new row)


@dataclass(frozen=True)
class Search:
    """How one batch is searched."""

    beam_size: int = 1
    patience: float = 1.0
    temperature: float = 0.0
    best_of: int = 5  # samples drawn per window above temperature 0

    @property
    def width(self) -> int:
        """Rows each window takes."""
        return self.best_of if self.temperature > 0 else self.beam_size

    @property
    def enough(self) -> int:
        """Finished hypotheses a window's search ends with."""
        if self.temperature > 0:
            return self.best_of
        return max(1, round(self.beam_size * self.patience))


@dataclass(frozen=True)
class Hypothesis:
    tokens: tuple[int, ...] = ()  # generated, end-of-text left out
    logprobs: tuple[float, ...] = ()  # each token's
    total: float = 0.0  # the tokens' log probabilities summed, end-of-text's included
    ended: bool = False  # wrote end-of-text (else it ran to its limit)

    def grown(self, token: int, logprob: float, eot: int) -> Hypothesis:
        if self.ended:
            return self
        if token == eot:
            return Hypothesis(self.tokens, self.logprobs, self.total + logprob, True)
        return Hypothesis((*self.tokens, token), (*self.logprobs, logprob), self.total + logprob)

    def score(self) -> float:
        return self.total / max(len(self.tokens), 1)


@dataclass(frozen=True)
class Decoded:
    """One window's decode: the hypothesis kept, the no-speech probability at its start."""

    best: Hypothesis
    no_speech_prob: float


@dataclass
class _Window:
    limit: int  # tokens it may generate
    rows: list[Hypothesis]  # one per row it takes
    finished: list[Hypothesis] = field(default_factory=list)
    over: bool = False


class Searcher:
    """One search over one batch of windows."""

    def __init__(self, net: WhisperNet, rules: TimestampRules, search: Search) -> None:
        self.net = net
        self.rules = rules
        self.search = search
        self.eot = rules.vocabulary.eot
        # Sampled at a fallback temperature: a generator of the search's own, seeded the same
        # every time, so a batch decodes alike whatever ran before it in the process (the
        # global generator's state depended on it, and so did a window's fallback text).
        self._draws: torch.Generator | None = None

    def run(
        self,
        cross: Cross,
        prompts: list[list[int]],
        sot: int,
        limits: list[int],
    ) -> list[Decoded]:
        """Decode each window (a row of ``cross``) after its prompt, generating at most its
        ``limits`` tokens; ``sot`` marks where the no-speech probability is read."""
        net, width = self.net, self.search.width
        length = max(map(len, prompts))
        # the prompts once a window; then a row for each of its beams or samples
        cache = net.start(cross, length + 16)
        tokens, positions, real = _padded(prompts, length, net.device)
        logits, _ = net.step(cache, tokens, positions, real)
        rows = torch.arange(len(prompts), device=net.device)
        at_sot = [length - len(p) + p.index(sot) for p in prompts]
        probs = torch.softmax(logits[rows, torch.tensor(at_sot, device=net.device)], dim=-1)
        no_speech = probs[:, self.rules.vocabulary.no_speech].tolist()
        windows = [_Window(limit, [Hypothesis()] * width) for limit in limits]
        cache.select(rows.repeat_interleave(width))
        cache.width = width
        last = logits[:, -1].repeat_interleave(width, dim=0)
        position = torch.tensor([len(p) for p in prompts], device=net.device)
        position = position.repeat_interleave(width)
        held = list(range(len(prompts)))  # the windows in the cache, in row order
        for step in range(max(limits)):
            history = [list(h.tokens) for w in held for h in windows[w].rows]
            logprobs = torch.log_softmax(self.rules.apply(last, history), dim=-1)
            picks = self._choose(logprobs, last, [windows[w] for w in held], step)
            alive = [slot for slot, w in enumerate(held) if not windows[w].over]
            if not alive:
                break
            # windows that are over leave the batch once a quarter of it is over: a copy of
            # the cache (the encoder's keys and values above all) costs more than idle rows
            compact = len(alive) <= COMPACT_AT * len(held)
            kept = alive if compact else list(range(len(held)))
            index = [slot * width + parent for slot in kept for parent, _ in picks[slot]]
            fed = [token for slot in kept for _, token in picks[slot]]
            if index != list(range(len(held) * width)):  # beams reordered, or windows left
                selected = torch.tensor(index, device=net.device)
                left = torch.tensor(kept, device=net.device) if compact else None
                cache.select(selected, left)
                position = position.index_select(0, selected)
            new = torch.tensor(fed, device=net.device)[:, None]
            real_new = torch.ones_like(new, dtype=torch.bool)
            logits, _ = net.step(cache, new, position[:, None], real_new)
            position = position + 1
            last = logits[:, -1]
            held = [held[slot] for slot in kept]
        return [_kept(w, p) for w, p in zip(windows, no_speech, strict=True)]

    def _idle(self) -> list[Pick]:
        """A window that is over, while it still holds rows: each row fed end-of-text."""
        return [(parent, self.eot) for parent in range(self.search.width)]

    def _choose(
        self, logprobs: Tensor, logits: Tensor, windows: list[_Window], step: int
    ) -> list[list[Pick]]:
        if self.search.temperature > 0:
            return self._sampled(logprobs, logits, windows, step)
        if self.search.beam_size == 1:
            return self._greedy(logprobs, windows, step)
        return self._beams(logprobs, windows, step)

    def _greedy(self, logprobs: Tensor, windows: list[_Window], step: int) -> list[list[Pick]]:
        values, indices = logprobs.max(dim=-1)
        best, tokens = values.tolist(), indices.tolist()  # one copy off the device a step
        out = []
        for slot, window in enumerate(windows):
            if window.over:
                out.append(self._idle())
                continue
            token = tokens[slot]
            grown = window.rows[0].grown(token, best[slot], self.eot)
            window.rows = [grown]
            if grown.ended or step + 1 >= window.limit:
                window.finished, window.over = [grown], True
            out.append([(0, token)])
        return out

    def _sampled(
        self, logprobs: Tensor, logits: Tensor, windows: list[_Window], step: int
    ) -> list[list[Pick]]:
        allowed = logits.masked_fill(torch.isneginf(logprobs), float("-inf"))
        weights = torch.softmax(allowed / self.search.temperature, dim=-1)
        if self._draws is None:
            self._draws = torch.Generator(device=weights.device).manual_seed(SAMPLING_SEED)
        drawn = torch.multinomial(weights, 1, generator=self._draws)[:, 0]
        chosen = logprobs.gather(1, drawn[:, None])[:, 0].tolist()
        drawn_list = drawn.tolist()
        width = self.search.width
        out = []
        for slot, window in enumerate(windows):
            if window.over:
                out.append(self._idle())
                continue
            picks, grown = [], []
            for parent, hypothesis in enumerate(window.rows):
                row = slot * width + parent
                token = self.eot if hypothesis.ended else drawn_list[row]
                grown.append(hypothesis.grown(token, chosen[row], self.eot))
                picks.append((parent, token))
            window.rows = grown
            if all(h.ended for h in grown) or step + 1 >= window.limit:
                window.finished, window.over = grown, True
            out.append(picks)
        return out

    def _beams(self, logprobs: Tensor, windows: list[_Window], step: int) -> list[list[Pick]]:
        width, enough = self.search.width, self.search.enough
        vocabulary = logprobs.shape[-1]
        totals = torch.tensor([h.total for w in windows for h in w.rows], device=logprobs.device)
        if step == 0:  # the beams are all the prompt alone: grow one of them
            totals = totals.view(-1, width).clone()
            totals[:, 1:] = float("-inf")
            totals = totals.view(-1)
        scores = (logprobs + totals[:, None]).view(len(windows), -1)
        top, flat = scores.topk(2 * width, dim=-1)
        chosen = logprobs.view(len(windows), -1).gather(1, flat)
        # each window's candidates, copied off the device once a step
        candidates = zip(top.tolist(), flat.tolist(), chosen.tolist(), strict=True)
        out = []
        for window, (scored, places, logprobs_of) in zip(windows, candidates, strict=True):
            if window.over:
                out.append(self._idle())
                continue
            beams: list[Hypothesis] = []
            picks: list[Pick] = []
            for score, at, logprob in zip(scored, places, logprobs_of, strict=True):
                if score == float("-inf") or len(beams) == width:
                    break
                parent, token = divmod(at, vocabulary)
                grown = window.rows[parent].grown(token, logprob, self.eot)
                if not grown.ended:
                    beams.append(grown)
                    picks.append((parent, token))
                elif len(window.finished) < enough:
                    window.finished.append(grown)
            while len(beams) < width and beams:  # fewer candidates than rows: repeat one
                beams.append(beams[0])
                picks.append(picks[0])
            window.rows = beams or window.rows  # a window over keeps its rows until it leaves
            if step + 1 >= window.limit or not beams:
                window.finished += beams[: max(0, enough - len(window.finished))]
            window.over = not beams or len(window.finished) >= enough or step + 1 >= window.limit
            out.append(picks)
        return out


def _kept(window: _Window, no_speech_prob: float) -> Decoded:
    candidates = window.finished or window.rows
    return Decoded(max(candidates, key=Hypothesis.score), no_speech_prob)


def _padded(
    prompts: list[list[int]], length: int, device: torch.device
) -> tuple[Tensor, Tensor, Tensor]:
    """Prompts left-padded to ``length``: tokens, each row's positions, which are real."""
    tokens = torch.zeros((len(prompts), length), dtype=torch.long)
    positions = torch.zeros_like(tokens)
    real = torch.zeros((len(prompts), length), dtype=torch.bool)
    for row, prompt in enumerate(prompts):
        pad = length - len(prompt)
        tokens[row, pad:] = torch.tensor(prompt)
        positions[row, pad:] = torch.arange(len(prompt))
        real[row, pad:] = True
    return tokens.to(device), positions.to(device), real.to(device)
