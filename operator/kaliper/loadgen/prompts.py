"""Generation requests for OpenAI-compatible servers: prompts (synthetic, to exact token counts, or from a
JSON Lines dataset) turned into request bodies once, before the load starts.

Synthetic prompts are strings of the tokenizer's own single-token words (" kali", " perto", ...): a
byte-level or SentencePiece tokenizer splits such a string at the spaces and encodes each word as its one
token, so a prompt of N words is N tokens; every prompt is encoded once more to check. Each prompt starts
with a different word, so no two share a prefix the server could serve from its cache, unless
sharedPrefixRatio asks for exactly that. Nothing is fetched: the tokenizer is a local tokenizer.json.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kaliper.api.profilerun import GenerationSpec, LengthDistribution, PromptSource, RequestSpec, SyntheticPrompts
from kaliper.jsonlines import json_lines
from kaliper.loadgen.payloads import PayloadError
from kaliper.loadgen.traces import PlayedTrace, TraceRequest

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"


@dataclass(frozen=True)
class Prompt:
    """One prompt: chat messages or completion text, and how many tokens to ask for."""

    messages: list[dict[str, Any]] | None
    text: str | None
    max_tokens: int
    prompt_tokens: int | None = None
    """Tokens of the prompt as the tokenizer counts them (synthetic prompts; dataset prompts when a tokenizer
    is given)."""


@dataclass(frozen=True)
class GenerationRequest:
    """A prepared request body and what it asks for."""

    body: bytes
    max_tokens: int
    prompt_tokens: int | None
    messages: list[dict[str, Any]] | None = None
    """The chat messages the body carries (what a session's next turn repeats)."""


def load_tokenizer(path: Path):  # -> tokenizers.Tokenizer
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises its own Exception subclass with the parser's words
        raise PayloadError(f"cannot read tokenizer {path}: {exc}") from exc


def draw_length(spec: LengthDistribution, rng: random.Random) -> int:
    """One count from the distribution, clamped to [min, max] (max defaults to 4 x mean)."""
    high = spec.max if spec.max is not None else 4 * spec.mean
    if spec.distribution == "fixed":
        value = float(spec.mean)
    elif spec.distribution == "uniform":
        value = rng.uniform(spec.min, high)
    elif spec.distribution == "normal":
        value = rng.gauss(spec.mean, spec.stddev)
    else:
        # Lognormal with the given mean and standard deviation (of the counts, not of their logarithm).
        variance = math.log(1 + (spec.stddev / spec.mean) ** 2)
        value = rng.lognormvariate(math.log(spec.mean) - variance / 2, math.sqrt(variance))
    return int(min(max(round(value), spec.min), high))


def single_token_words(tokenizer: Any) -> list[str]:
    """Words (with their leading space) that the tokenizer encodes as exactly one token, in id order."""
    words = []
    for token_id in range(tokenizer.get_vocab_size()):
        text = tokenizer.decode([token_id])
        word = text[1:]
        alphabetic = text.startswith(" ") and 2 <= len(word) <= 12 and word.isascii() and word.isalpha()
        if alphabetic and tokenizer.encode(text, add_special_tokens=False).ids == [token_id]:
            words.append(text)
    return words


def _enough_words(tokenizer: Any) -> list[str]:
    words = single_token_words(tokenizer)
    if len(words) < 64:
        raise PayloadError(
            f"the tokenizer has only {len(words)} single-token words; prompts made to token counts need at least "
            "64 (is it the model's tokenizer.json?)"
        )
    return words


def _checked_text(words: list[str], tokenizer: Any) -> str:
    """The prompt of these single-token words, checked to encode to as many tokens as it has words."""
    text = "".join(words)
    counted = len(tokenizer.encode(text, add_special_tokens=False).ids)
    if counted != len(words):
        raise PayloadError(
            f"a prompt of {len(words)} words encodes to {counted} tokens with this tokenizer; "
            "use a dataset of prompts instead"
        )
    # (The leading space stays: without it the first word may encode as two tokens.)
    return text


def synthetic_prompts(spec: SyntheticPrompts, tokenizer: Any, generation: GenerationSpec, chat: bool) -> list[Prompt]:
    words = _enough_words(tokenizer)
    rng = random.Random(spec.seed)
    firsts = words[:]
    rng.shuffle(firsts)
    lengths = [draw_length(spec.input_tokens, rng) for _ in range(spec.count)]
    prefix_tokens = [round(spec.shared_prefix_ratio * n) for n in lengths]
    shared = [rng.choice(words) for _ in range(max(prefix_tokens, default=0))]
    prompts = []
    for index, length in enumerate(lengths):
        own = length - prefix_tokens[index]
        chosen = shared[: prefix_tokens[index]]
        if own > 0:
            # The first word after the shared prefix differs between prompts (cycling the shuffled pool).
            chosen = [*chosen, firsts[index % len(firsts)], *(rng.choice(words) for _ in range(own - 1))]
        text = _checked_text(chosen, tokenizer)
        max_tokens = draw_length(spec.output_tokens, rng) if spec.output_tokens else generation.max_tokens
        messages = [{"role": "user", "content": text}] if chat else None
        prompts.append(Prompt(messages, None if chat else text, max_tokens, length))
    return prompts


def trace_prompts(
    requests: list[TraceRequest],
    tokenizer: Any,
    chat: bool,
    block_tokens: int,
    previous: list[int | None] | None = None,
) -> list[Prompt]:
    """One prompt per trace request, of its input tokens, asking for its output tokens. Equal block ids are
    equal runs of `block_tokens` words (the prefix the trace says requests share); a prompt longer than its
    blocks, or without blocks, goes on with words of its own, the first of them different between prompts.

    With `previous` (a replay of conversations: each request's session turn before it), a later turn is sent
    after its session's history, so its own prompt is what its input tokens add to that history: the turn
    before's input and output tokens (at least one token; the history itself is the shared prefix)."""
    words = _enough_words(tokenizer)
    firsts = words[:]
    random.Random(0).shuffle(firsts)
    blocks: dict[int, list[str]] = {}

    def block(block_id: int) -> list[str]:
        if block_id not in blocks:
            rng = random.Random(block_id)
            blocks[block_id] = [firsts[block_id % len(firsts)], *(rng.choice(words) for _ in range(block_tokens - 1))]
        return blocks[block_id]

    prompts = []
    for index, request in enumerate(requests):
        before = previous[index] if previous is not None else None
        if before is None:
            chosen = [word for block_id in request.blocks for word in block(block_id)][: request.input_tokens]
            own = request.input_tokens - len(chosen)
        else:
            history = requests[before].input_tokens + requests[before].output_tokens
            chosen, own = [], max(1, request.input_tokens - history)
        if own > 0:
            rng = random.Random(-1 - index)
            chosen += [firsts[index % len(firsts)], *(rng.choice(words) for _ in range(own - 1))]
        text = _checked_text(chosen, tokenizer)
        messages = [{"role": "user", "content": text}] if chat else None
        prompts.append(Prompt(messages, None if chat else text, request.output_tokens, len(chosen)))
    return prompts


def dataset_prompts(path: Path, generation: GenerationSpec, chat: bool) -> list[Prompt]:
    """JSON Lines: {"prompt": "..."} or {"messages": [...]}, with an optional positive "max_tokens"."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise PayloadError(f"cannot read dataset {path}: {exc.strerror or exc}") from exc
    prompts = []
    for where, row in json_lines(lines, path, PayloadError):
        if not isinstance(row, dict) or ("prompt" in row) == ("messages" in row):
            raise PayloadError(f'{where}: each row needs exactly one of "prompt" (a string) or "messages" (a list)')
        max_tokens = row.get("max_tokens", generation.max_tokens)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise PayloadError(f'{where}: "max_tokens" must be a positive whole number')
        if "prompt" in row:
            if not isinstance(row["prompt"], str):
                raise PayloadError(f'{where}: "prompt" must be a string')
            messages = [{"role": "user", "content": row["prompt"]}] if chat else None
            prompts.append(Prompt(messages, None if chat else row["prompt"], max_tokens))
        else:
            if not chat:
                raise PayloadError(f'{where}: "messages" rows need request.protocol openai-chat')
            messages = row["messages"]
            if not isinstance(messages, list) or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in messages
            ):
                raise PayloadError(f'{where}: "messages" must be a list of {{"role": ..., "content": ...}} objects')
            prompts.append(Prompt(messages, None, max_tokens))
    if not prompts:
        raise PayloadError(f"dataset {path} has no prompts (it is empty)")
    return prompts


def dataset_prompt_tokens(prompt: Prompt, tokenizer: Any) -> int:
    """A dataset prompt's tokens by the tokenizer, for answers whose server sends no usage: the text, or the
    chat messages' contents (the chat template's own tokens are the server's to add: a lower bound)."""
    if prompt.messages is not None:
        texts = [m["content"] for m in prompt.messages if isinstance(m.get("content"), str)]
    else:
        texts = [prompt.text or ""]
    return sum(len(tokenizer.encode(text, add_special_tokens=False).ids) for text in texts)


def request_body(prompt: Prompt, request: RequestSpec, model: str) -> bytes:
    """The JSON body of one generation request."""
    generation = request.generation or GenerationSpec()
    body: dict[str, Any] = {"model": model}
    if prompt.messages is not None:
        body["messages"] = prompt.messages
    else:
        body["prompt"] = prompt.text
    body["max_tokens"] = prompt.max_tokens
    body["stream"] = generation.stream
    if generation.stream and generation.include_usage:
        body["stream_options"] = {"include_usage": True}
    if generation.ignore_eos is not None:
        body["ignore_eos"] = generation.ignore_eos
    if generation.sampling is not None:
        body.update(generation.sampling.model_dump(exclude_none=True))
    if generation.extra_body:
        body.update(generation.extra_body)
    return json.dumps(body, separators=(",", ":")).encode()


def generation_requests(
    prompts_spec: PromptSource,
    request: RequestSpec,
    model: str,
    tokenizer: Any | None,
    trace: PlayedTrace | None = None,
) -> list[GenerationRequest]:
    """The request bodies, made once; a trace's (`trace`: the part it replays) in its order."""
    generation = request.generation or GenerationSpec()
    chat = request.protocol == "openai-chat"
    if prompts_spec.synthetic is not None:
        assert tokenizer is not None  # the API requires prompts.tokenizer with synthetic prompts
        prompts = synthetic_prompts(prompts_spec.synthetic, tokenizer, generation, chat)
    elif prompts_spec.trace is not None:
        assert tokenizer is not None and trace is not None  # the API requires prompts.tokenizer with a trace
        prompts = trace_prompts(trace.requests, tokenizer, chat, prompts_spec.trace.block_tokens, trace.previous)
    else:
        assert prompts_spec.dataset is not None
        if prompts_spec.dataset.file is None:
            raise PayloadError("dataset.configMap is read inside the cluster; locally, use dataset.file")
        prompts = dataset_prompts(Path(prompts_spec.dataset.file), generation, chat)
        if tokenizer is not None:
            prompts = [replace(p, prompt_tokens=dataset_prompt_tokens(p, tokenizer)) for p in prompts]
        if prompts_spec.dataset.order == "random":
            random.Random(0).shuffle(prompts)
    return [
        GenerationRequest(request_body(p, request, model), p.max_tokens, p.prompt_tokens, p.messages) for p in prompts
    ]
