"""The transformers backend: exact tokens and logprobs from the sampling pass, batching, stops."""

from __future__ import annotations

import pytest
import torch

from boltzoo.agents.base import Turn
from boltzoo.agents.transformers_policy import PromptTooLongError, sample_token, shared_heads

CHATS = [
    [{"role": "user", "content": "What is 2 + 3?"}],
    [
        {"role": "system", "content": "You solve math problems."},
        {"role": "user", "content": "A baker makes 12 trays of 7 buns. How many buns?"},
        {"role": "assistant", "content": "<calc>12*7</calc>"},
        {"role": "tool", "content": "<calc>12*7</calc> = 84"},
    ],
    [{"role": "user", "content": "Hi"}],
]


def recomputed_logprobs(policy, completion, temperature):
    """The learner's view: one full forward pass over prompt + response, unpadded."""
    ids = torch.tensor([completion.prompt_token_ids + completion.response_token_ids])
    with torch.no_grad():
        logits = policy.model(ids).logits[0].float()
    scaled = logits / temperature if temperature > 0 else logits
    logprobs = torch.log_softmax(scaled, dim=-1)
    start = len(completion.prompt_token_ids)
    return [
        logprobs[start - 1 + i, token].item()
        for i, token in enumerate(completion.response_token_ids)
    ]


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_logprobs_match_a_full_forward_pass_at_the_same_temperature(
    tiny_policy, temperature, top_p
):
    policy = tiny_policy(temperature=temperature, top_p=top_p, max_new_tokens=12)
    completions = policy.generate(CHATS)  # batched, left-padded, rows finishing apart
    for completion in completions:
        assert len(completion.logprobs) == len(completion.response_token_ids) > 0
        expected = recomputed_logprobs(policy, completion, temperature)
        assert completion.logprobs == pytest.approx(expected, abs=1e-4)


def test_prompt_ids_are_the_chat_template_and_text_decodes_from_response_ids(
    tiny_policy, smollm2_tokenizer
):
    policy = tiny_policy()
    completions = policy.generate(CHATS)
    for chat, completion in zip(CHATS, completions, strict=True):
        expected = smollm2_tokenizer.apply_chat_template(
            chat, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        assert completion.prompt_token_ids == list(expected)
        assert completion.text == smollm2_tokenizer.decode(
            completion.response_token_ids, skip_special_tokens=True
        )
        assert completion.sampling_params == {
            "max_new_tokens": 16,
            "temperature": 1.0,
            "top_p": 1.0,
            "stop": [],
        }
        assert completion.model == "tiny" and completion.policy_version == 0


def test_same_seed_samples_the_same_tokens_and_another_seed_does_not(tiny_policy):
    first = [c.response_token_ids for c in tiny_policy(seed=3).generate(CHATS)]
    again = [c.response_token_ids for c in tiny_policy(seed=3).generate(CHATS)]
    assert first == again
    policy = tiny_policy(seed=3)
    policy.generator.manual_seed(4)
    assert [c.response_token_ids for c in policy.generate(CHATS)] != first


def test_max_new_tokens_bounds_the_response(tiny_policy):
    policy = tiny_policy(max_new_tokens=5)
    policy.eos_token_ids = set()  # nothing ends a response early: each runs to the bound
    for completion in policy.generate(CHATS):
        assert len(completion.response_token_ids) == 5 == len(completion.logprobs)
        assert completion.finish_reason == "length"


def test_stop_string_ends_the_response_and_is_cut_from_the_text(tiny_policy, smollm2_tokenizer):
    policy = tiny_policy(stop=["e"], max_new_tokens=40)
    completions = policy.generate(CHATS * 3)
    assert any(c.finish_reason == "stop" for c in completions)
    for completion in completions:
        assert "e" not in completion.text
        full = smollm2_tokenizer.decode(completion.response_token_ids, skip_special_tokens=True)
        if completion.finish_reason == "stop":
            assert "e" in full and full.startswith(completion.text)
            # The stop string arrived with the last token, not earlier.
            before = smollm2_tokenizer.decode(
                completion.response_token_ids[:-1], skip_special_tokens=True
            )
            assert "e" not in before


def test_end_of_sequence_token_ends_the_response_and_is_kept_in_the_ids(tiny_policy):
    policy = tiny_policy(max_new_tokens=10)
    policy.eos_token_ids = set(range(len(policy.tokenizer)))  # any token ends the response
    for completion in policy.generate(CHATS):
        assert len(completion.response_token_ids) == 1
        assert completion.finish_reason == "stop" and len(completion.logprobs) == 1


def test_batches_are_split_at_max_batch_size_and_rows_keep_their_order(tiny_policy):
    whole = tiny_policy(seed=1, temperature=0.0).generate(CHATS * 2)
    split = tiny_policy(seed=1, temperature=0.0, max_batch_size=2).generate(CHATS * 2)
    for a, b in zip(whole, split, strict=True):
        assert a.prompt_token_ids == b.prompt_token_ids
        # greedy: each row's answer is its own, whatever rows shared its batch
        assert a.response_token_ids == b.response_token_ids and a.text == b.text
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_more_prompts_than_a_batch_are_batched_by_length(tiny_policy):
    long_chat = [*CHATS[1][:-1], {"role": "tool", "content": "<calc>12*7</calc> = 84 buns"}]
    chats = [CHATS[1], CHATS[0], long_chat, CHATS[2]]  # long, short, long, short
    # (each prompt prefilled whole: what is timed here is the batching, not shared starts)
    policy = tiny_policy(temperature=0.0, max_batch_size=2, share_prefill=False)
    lengths = [len(policy.encode_chat(chat)) for chat in chats]
    prefills = []
    hook = policy.model.register_forward_pre_hook(
        lambda module, args, kwargs: (
            prefills.append(tuple(kwargs["input_ids"].shape))
            if kwargs["input_ids"].shape[1] > 1
            else None
        ),
        with_kwargs=True,
    )
    try:
        completions = policy.generate(chats)
    finally:
        hook.remove()
    # the two short prompts share a batch, padded to the longer of them, not to a long one
    assert prefills == [(2, max(lengths[1], lengths[3])), (2, max(lengths[0], lengths[2]))]
    assert [c.prompt_token_ids for c in completions] == [policy.encode_chat(c) for c in chats]


GROUPED = [CHATS[0], CHATS[0], CHATS[1], CHATS[0], CHATS[2], CHATS[1]]  # GRPO-shaped: repeats


def test_shared_heads_group_prompts_by_the_start_they_share():
    schema_a, schema_b = list(range(100, 160)), list(range(300, 380))
    prompts = [
        [*schema_a, 1, 2],  # 0
        [*schema_b, 5],  # 1
        [*schema_a, 1, 2],  # 2: a copy of 0
        [*schema_a, 7, 8, 9],  # 3: 0's schema, another question
        [*schema_b, 6, 6],  # 4
        [1, 2, 3],  # 5: shares nothing
        [*schema_a[:10], 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4],  # 6: a start too short to share
    ]
    heads, source = shared_heads(prompts)
    for prompt, head in zip(prompts, source, strict=True):  # a head is a proper prefix
        assert tuple(prompt[: len(heads[head])]) == heads[head] and len(heads[head]) < len(prompt)
    assert source[0] == source[2] == source[3] and heads[source[0]] == tuple(schema_a)
    assert source[1] == source[4] and heads[source[1]] == tuple(schema_b)
    assert len({source[0], source[1], source[5], source[6]}) == 4
    # copies of one prompt share all of it but the last token
    heads, source = shared_heads([[4, 5, 6], [4, 5, 6]])
    assert heads == [(4, 5)] and source == [0, 0]


def test_prompts_that_start_alike_share_one_prefill_and_are_sampled_apart(tiny_policy):
    policy = tiny_policy(temperature=1.0, max_new_tokens=12)
    passes = []
    hook = policy.model.register_forward_pre_hook(
        lambda module, args, kwargs: passes.append(tuple(kwargs["input_ids"].shape)),
        with_kwargs=True,
    )
    try:
        completions = policy.generate(GROUPED)
    finally:
        hook.remove()
    prompts = [c.prompt_token_ids for c in completions]
    heads, _ = shared_heads(prompts)
    # the shared starts once, then every row's own tail, then every row decodes
    assert passes[0] == (len(heads), max(map(len, heads))) and len(heads) < 3
    assert passes[1][0] == 6 and passes[1][1] < min(map(len, prompts))
    assert passes[2] == (6, 1)
    for completion in completions:  # each row's logprobs are still its own sampling pass's
        assert completion.logprobs == pytest.approx(
            recomputed_logprobs(policy, completion, 1.0), abs=1e-4
        )
    # the copies of a prompt are independent samples, not one sample copied
    assert len({tuple(completions[i].response_token_ids) for i in (0, 1, 3)}) > 1


def test_shared_prefill_answers_as_a_prefill_per_row_does(tiny_policy):
    shared = tiny_policy(seed=1, temperature=0.0).generate(GROUPED)
    per_row = tiny_policy(seed=1, temperature=0.0, share_prefill=False).generate(GROUPED)
    for a, b in zip(shared, per_row, strict=True):
        assert a.prompt_token_ids == b.prompt_token_ids
        assert a.response_token_ids == b.response_token_ids and a.text == b.text
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_prompt_over_the_limit_is_a_clear_error(tiny_policy):
    policy = tiny_policy(max_prompt_tokens=8)
    with pytest.raises(PromptTooLongError, match="max_prompt_tokens=8"):
        policy.generate(CHATS[:1])


def test_act_takes_turns_and_returns_one_completion_each(tiny_policy):
    turns = [Turn(agent="solver", observation={"messages": chat}) for chat in CHATS]
    completions = tiny_policy().act(turns)
    assert len(completions) == 3 and all(c.has_tokens for c in completions)


def test_top_p_keeps_only_the_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    generator = torch.Generator().manual_seed(0)
    drawn = {int(sample_token(logits, 1.0, 0.8, generator)[0]) for _ in range(300)}
    assert drawn == {0, 1}  # 0.5 + 0.3 reaches 0.8: tokens 2 and 3 are never drawn
    tokens, logprobs = sample_token(logits, 1.0, 0.8, generator)
    # The recorded logprob is the untruncated one.
    assert logprobs[0].item() == pytest.approx(
        torch.log(torch.tensor([0.5, 0.3]))[int(tokens[0])].item(), abs=1e-6
    )


@pytest.mark.slow
def test_policies_sharing_a_peft_model_sample_from_threads_as_they_do_alone(smollm2_tokenizer):
    # a gateway per policy samples from its own thread; the adapter switch must not leak
    from concurrent.futures import ThreadPoolExecutor

    from boltzoo.agents.models import tiny_model
    from boltzoo.agents.transformers_policy import TransformersPolicy
    from boltzoo.lightningrl.weights import add_lora_adapters

    model = add_lora_adapters(tiny_model(len(smollm2_tokenizer)), ["tuned"], r=4, alpha=8)
    torch.manual_seed(0)
    with torch.no_grad():  # a tuned adapter that changes the greedy answers
        for name, parameter in model.named_parameters():
            if ".lora_B.tuned" in name:
                parameter.normal_(0, 0.5)
    policies = [
        TransformersPolicy(
            model, smollm2_tokenizer, adapter=adapter, max_new_tokens=12, temperature=0.0
        )
        for adapter in ("tuned", None)
    ]
    alone = [[c.response_token_ids for c in p.generate(CHATS)] for p in policies]
    assert alone[0] != alone[1]
    with ThreadPoolExecutor(2) as pool:
        for _ in range(10):
            futures = [pool.submit(p.generate, CHATS) for p in policies]
            together = [[c.response_token_ids for c in f.result()] for f in futures]
            assert together == alone
