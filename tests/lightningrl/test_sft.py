"""The warm start for real: SFT on recorded episodes with a tiny model, masks, hand-over to RL."""

from __future__ import annotations

import json

import pytest
import torch

import boltzoo
from boltzoo.agents import NaivePolicy, OraclePolicy
from boltzoo.agents.models import tiny_model
from boltzoo.agents.scripted import ScriptedPolicy
from boltzoo.agents.transformers_policy import TransformersPolicy
from boltzoo.episode import load_episodes, save_episodes
from boltzoo.errors import ConfigError, DatasetError, RunFolderError
from boltzoo.lightningrl.config import SFTConfig, TrainerConfig
from boltzoo.lightningrl.sequences import response_logprobs
from boltzoo.lightningrl.sft import SFTTrainer
from boltzoo.lightningrl.trainer import Trainer
from boltzoo.lightningrl.weights import lora_state_dict
from boltzoo.registration import inspected


def sft_config(tmp_path, demos, **overrides) -> SFTConfig:
    values = dict(
        env="math-v0",
        demos=[str(demos)],
        model="tiny",
        output_dir=str(tmp_path / "sft"),
        lora_r=0,
        eval_tasks=0,
        sampler="shared",
        progress=False,
    )
    return SFTConfig(**(values | overrides))


def record(path, policy, tasks, **env_kwargs):
    episodes = boltzoo.rollout("math-v0", policy, tasks=tasks, progress=False, **env_kwargs)
    save_episodes(path, episodes)
    return episodes


def full_sequence_loss(model, transitions):
    """The mean negative log-likelihood of the response tokens, each sequence run on its own
    from its first token: the reference the batched, padded SFT loss must equal."""
    total, tokens = 0.0, 0
    for t in transitions:
        ids = torch.tensor([t.prompt_token_ids + t.response_token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0].float()
        start = len(t.prompt_token_ids)
        logprobs = torch.log_softmax(logits[start - 1 : -1], dim=-1)
        targets = torch.tensor(t.response_token_ids)
        total -= float(logprobs.gather(-1, targets[:, None]).sum())
        tokens += len(t.response_token_ids)
    return total / tokens


@pytest.mark.slow
def test_sft_learns_exactly_the_trained_agents_response_tokens(tmp_path, smollm2_tokenizer):
    # A recorded team episode: math-v0's solver (a calculator turn, then the answer) and its
    # verifier, with the real token ids the chat template gives. Only the solver is trained.
    demos = tmp_path / "demos.jsonl"
    scripted = ScriptedPolicy(lambda turn: turn.env.oracle_action(turn.agent), smollm2_tokenizer)
    team = {"agents": ["solver", "verifier"]}
    episodes = record(demos, {"solver": scripted, "verifier": scripted}, [0, 1], **team)
    model = tiny_model(len(smollm2_tokenizer))
    trainer = SFTTrainer(
        sft_config(tmp_path, demos, env_kwargs=team, train_agents=["solver"], batch_size=8),
        model=model,
        tokenizer=smollm2_tokenizer,
    )
    solver_calls = [s.action for e in episodes for s in e.steps if s.agent == "solver"]
    assert len(solver_calls) == 4 and len(trainer.transitions) == 4
    # token by token: the recorded ids, the solver's calls only (the tool output is in the
    # second call's prompt, the verifier's turn in no sequence)
    assert sorted(t.response_token_ids for t in trainer.transitions) == sorted(
        c.response_token_ids for c in solver_calls
    )
    assert sorted(t.prompt_token_ids for t in trainer.transitions) == sorted(
        c.prompt_token_ids for c in solver_calls
    )
    assert {t.agent for t in trainer.transitions} == {"solver"}
    second = [t for t in trainer.transitions if t.turn == 1]
    assert len(second) == 2
    assert all("</calc> = " in smollm2_tokenizer.decode(t.prompt_token_ids) for t in second)

    # The padded, batched loss is the mean NLL over exactly those response tokens.
    expected = full_sequence_loss(model, trainer.transitions)
    ((name, batch),) = trainer.batches(0)
    assert len(batch) == 4
    logprobs, mask, _ = response_logprobs(model, batch, 1.0, smollm2_tokenizer.pad_token_id)
    assert [int(row.sum()) for row in mask] == [len(t.response_token_ids) for t in batch]
    out = trainer.sft_step(name, batch)
    assert out["tokens"] == sum(len(c.response_token_ids) for c in solver_calls)
    assert out["sft_loss"] == pytest.approx(expected, rel=1e-4)


def test_text_only_demonstrations_are_tokenised_with_the_chat_template(tmp_path, smollm2_tokenizer):
    demos = tmp_path / "demos.jsonl"
    (episode,) = record(demos, {"solver": OraclePolicy()}, [3])
    assert episode.steps[0].action.prompt_token_ids is None  # the oracle writes text only
    trainer = SFTTrainer(
        sft_config(tmp_path, demos),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )
    first = trainer.transitions[0]
    messages = episode.steps[0].observation["messages"]
    prompt = smollm2_tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False
    )
    assert smollm2_tokenizer.decode(first.prompt_token_ids) == prompt
    assert smollm2_tokenizer.decode(first.response_token_ids) == (
        episode.steps[0].action.text + smollm2_tokenizer.eos_token
    )


@pytest.mark.slow
def test_sft_lowers_the_loss_and_the_model_reproduces_the_demonstrated_answer(
    tmp_path, smollm2_tokenizer
):
    # One single-turn demonstration, learned by heart: afterwards the greedy model writes it.
    demos = tmp_path / "demos.jsonl"
    (demo,) = record(demos, {"solver": OraclePolicy()}, [5], max_turns=1)
    model = tiny_model(len(smollm2_tokenizer))
    config = sft_config(
        tmp_path, demos, env_kwargs={"max_turns": 1}, epochs=40, batch_size=1, lr=1e-2
    )
    trainer = SFTTrainer(config, model=model, tokenizer=smollm2_tokenizer)
    policy = TransformersPolicy(model, smollm2_tokenizer, max_new_tokens=24, temperature=0.0)
    before = boltzoo.rollout("math-v0", {"solver": policy}, tasks=[5], max_turns=1, progress=False)
    history = trainer.train()
    assert history[-1]["sft_loss"] < 0.1 * history[0]["sft_loss"]
    (after,) = boltzoo.rollout(
        "math-v0", {"solver": policy}, tasks=[5], max_turns=1, progress=False
    )
    assert before[0].steps[0].action.text != demo.steps[0].action.text
    assert after.steps[0].action.text == demo.steps[0].action.text
    assert after.success
    # metrics.jsonl has a line per step; the checkpoint holds the last one
    lines = (tmp_path / "sft" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == list(range(1, 41))
    assert (tmp_path / "sft" / "checkpoints" / "latest").read_text().strip() == "step-000040"


def warm_start(tmp_path, tokenizer, lora: dict) -> SFTTrainer:
    """A tiny model's warm start, two epochs on four math-v0 oracle demonstrations, in
    ``tmp_path / "sft"``."""
    demos = tmp_path / "demos.jsonl"
    record(demos, {"solver": OraclePolicy()}, [0, 1, 2, 3])
    sft = SFTTrainer(
        sft_config(tmp_path, demos, epochs=2, lr=1e-2, **lora),
        model=tiny_model(len(tokenizer)),
        tokenizer=tokenizer,
    )
    sft.train()
    return sft


def probed_warm_start(tmp_path, tokenizer, lora: dict):
    """Return :func:`warm_start`'s trainer, ``logprobs_of(module)``: a module's log-probs of
    four of the demonstrated calls' responses, and the warm start's own."""
    sft = warm_start(tmp_path, tokenizer, lora)
    batch, pad = sft.transitions[:4], tokenizer.pad_token_id

    def logprobs_of(module):
        with torch.no_grad():
            return response_logprobs(module, batch, 1.0, pad)[0]

    return sft, logprobs_of, logprobs_of(sft.run.weights.module("policy"))


def team_trainers(tmp_path, tokenizer, lora: dict, **settings):
    """Return ``trainer(**overrides)``: an RL :class:`Trainer` of math-v0's solver and verifier
    with a tiny model, writing to ``tmp_path / "rl"``, with ``settings`` then ``overrides``."""
    base = dict(
        env="math-v0",
        env_kwargs={"agents": ["solver", "verifier"]},
        model="tiny",
        output_dir=str(tmp_path / "rl"),
        progress=False,
        **lora,
    )

    def trainer(**overrides):
        return Trainer(
            TrainerConfig(**(base | settings | overrides)),
            model=tiny_model(len(tokenizer)),
            tokenizer=tokenizer,
        )

    return trainer


@pytest.mark.slow
def test_rl_init_from_continues_from_the_sft_weights(tmp_path, smollm2_tokenizer):
    lora = {"lora_r": 4, "lora_alpha": 8.0}
    sft = warm_start(tmp_path, smollm2_tokenizer, lora)
    batch = sft.transitions[:4]
    pad = smollm2_tokenizer.pad_token_id

    def logprobs_of(trainer):
        with torch.no_grad():
            return response_logprobs(trainer.weights.module("policy"), batch, 1.0, pad)[0]

    rl_config = TrainerConfig(
        env="math-v0", model="tiny", output_dir=str(tmp_path / "rl"), progress=False, **lora
    )
    fresh = Trainer(
        rl_config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer
    )
    rl = Trainer(
        TrainerConfig(**(rl_config.to_dict() | {"init_from": str(tmp_path / "sft")})),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )
    assert torch.allclose(logprobs_of(rl), logprobs_of(sft.run), atol=1e-6)
    assert not torch.allclose(logprobs_of(fresh), logprobs_of(sft.run), atol=1e-3)
    # weights only: the RL run starts at step 0
    assert rl.sampling.trained["policy"].version == 0 and rl.step == 0

    # Another adapter shape cannot take those weights: a clear error, the SFT run untouched.
    before = (tmp_path / "sft" / "checkpoints" / "latest").read_text()
    with pytest.raises(RunFolderError, match="lora_r"):
        Trainer(
            TrainerConfig(
                **(rl_config.to_dict() | {"init_from": str(tmp_path / "sft"), "lora_r": 8})
            ),
            model=tiny_model(len(smollm2_tokenizer)),
            tokenizer=smollm2_tokenizer,
        )
    assert (tmp_path / "sft" / "checkpoints" / "latest").read_text() == before


@pytest.mark.parametrize("lora_r", [4, 0])
@pytest.mark.slow
def test_init_from_per_policy_starts_each_policy_from_its_own_warm_start(
    tmp_path, smollm2_tokenizer, lora_r
):
    # One adapter (or model) per agent, each warm-started on its own: init_from maps policy
    # names to runs, each policy takes its run's only policy (or the one of its name), and
    # nothing else is loaded into it.
    lora = {"lora_r": lora_r, "lora_alpha": 8.0}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, logprobs_of, warm_a = probed_warm_start(tmp_path / "a", smollm2_tokenizer, lora)
    sft_b = warm_start(tmp_path / "b", smollm2_tokenizer, lora | {"seed": 1, "max_grad_norm": 0.05})
    warm_b = logprobs_of(sft_b.run.weights.module("policy"))
    assert not torch.allclose(warm_a, warm_b, atol=1e-3)  # two different starts
    trainer = team_trainers(
        tmp_path,
        smollm2_tokenizer,
        lora,
        policy_map={"solver": "solver", "verifier": "verifier"},
        init_from={"solver": str(tmp_path / "a" / "sft"), "verifier": str(tmp_path / "b" / "sft")},
    )
    rl = trainer()
    assert torch.allclose(logprobs_of(rl.weights.module("solver")), warm_a, atol=1e-5)
    assert torch.allclose(logprobs_of(rl.weights.module("verifier")), warm_b, atol=1e-5)
    assert rl.step == 0

    # A run with several policies gives the one of the same name: the verifier from the RL
    # run's checkpoint (warm start b), the solver from a.
    rl.save()
    again = trainer(
        output_dir=str(tmp_path / "rl2"),
        init_from={"solver": str(tmp_path / "a" / "sft"), "verifier": str(tmp_path / "rl")},
    )
    assert torch.allclose(logprobs_of(again.weights.module("verifier")), warm_b, atol=1e-5)
    assert torch.allclose(logprobs_of(again.weights.module("solver")), warm_a, atol=1e-5)
    with pytest.raises(RunFolderError, match="none is 'writer'"):
        trainer(policy_map={"solver": "writer", "verifier": "verifier"}, init_from={
            "writer": str(tmp_path / "rl"), "verifier": str(tmp_path / "b" / "sft")})  # fmt: skip
    # every policy is named once: one left out is a clear error, not a policy from scratch
    with pytest.raises(RunFolderError, match=r"names policies \['solver'\]; this run has"):
        trainer(init_from={"solver": str(tmp_path / "a" / "sft")})
    with pytest.raises(ConfigError, match="maps policy names to run folders"):
        trainer(init_from={"solver": 3})
    if lora_r:  # runs that trained different adapters cannot be combined
        (tmp_path / "c").mkdir()
        warm_start(tmp_path / "c", smollm2_tokenizer, lora | {"lora_r": 8})
        with pytest.raises(RunFolderError, match="trained different weights"):
            trainer(init_from={"solver": str(tmp_path / "a" / "sft"),
                               "verifier": str(tmp_path / "c" / "sft")})  # fmt: skip


@pytest.mark.parametrize("lora_r", [4, 0])
@pytest.mark.slow
def test_frozen_policy_keeps_the_agents_that_do_not_learn_at_the_warm_start(
    tmp_path, smollm2_tokenizer, lora_r
):
    # A verifier (or a graph's checker) warm-started beside the solver: in RL only the solver
    # learns, and with frozen_policy the verifier acts with the warm start for the whole run,
    # not with the untrained base model, and not with the weights the solver's updates move.

    lora = {"lora_r": lora_r, "lora_alpha": 8.0}
    _, logprobs_of, warm = probed_warm_start(tmp_path, smollm2_tokenizer, lora)
    trainer = team_trainers(
        tmp_path,
        smollm2_tokenizer,
        lora,
        train_agents=["solver"],
        init_from=str(tmp_path / "sft"),
        sampler="copy",
        sampler_precision="fp32",
    )
    rl = trainer(frozen_policy="policy")
    assert rl.sampling.by_agent()["verifier"] is rl.sampling.frozen
    assert torch.allclose(logprobs_of(rl.sampling.frozen.model), warm, atol=1e-5)
    base = trainer().sampling.frozen.model  # without it: the untrained base, as before
    assert not torch.allclose(logprobs_of(base), warm, atol=1e-3)
    # the solver's policy moves and is synced to its sampler; the verifier's does not move
    with torch.no_grad():
        for parameter in rl.weights.parameters["policy"]:
            parameter.add_(0.05 * torch.randn_like(parameter))
    rl.sampling.sync(rl.weights.names, 1)
    assert not torch.allclose(logprobs_of(rl.sampling.trained["policy"].model), warm, atol=1e-3)
    assert torch.allclose(logprobs_of(rl.sampling.frozen.model), warm, atol=1e-5)

    with pytest.raises(ConfigError, match="sampler='copy' or 'vllm'"):
        trainer(sampler="shared", frozen_policy="policy")
    with pytest.raises(ConfigError, match="not a policy of this run: \\['policy'\\]"):
        trainer(frozen_policy="checker")
    with pytest.raises(ConfigError, match="every agent learns"):
        trainer(frozen_policy="policy", train_agents=None)


@pytest.mark.parametrize("lora_r", [4, 0])
@pytest.mark.slow
def test_rl_kl_reference_after_a_warm_start_is_the_warm_start(tmp_path, smollm2_tokenizer, lora_r):
    # With kl_coef, the KL must hold the policy near where RL starts (the SFT weights), not
    # near the untrained base, and the reference must not move when the policy does.
    lora = {"lora_r": lora_r, "lora_alpha": 8.0}
    sft, logprobs_of, warm = probed_warm_start(tmp_path, smollm2_tokenizer, lora)
    batch = sft.transitions[:4]
    rl = Trainer(
        TrainerConfig(
            env="math-v0",
            model="tiny",
            output_dir=str(tmp_path / "rl"),
            progress=False,
            sampler="shared",
            kl_coef=0.1,
            init_from=str(tmp_path / "sft"),
            **lora,
        ),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )

    def reference_logprobs():
        with rl.weights.reference("policy") as reference:
            return logprobs_of(reference)

    assert torch.allclose(reference_logprobs(), warm, atol=1e-6)
    if lora_r:  # a frozen copy of the adapter on the same base, not a copy of the model
        assert rl.weights.references["policy"] == "policy_reference"
        assert rl.weights.state_dict().keys() == set(lora_state_dict(sft.run.weights.model))
    # Through the learner's own update: before it moves, the policy is its reference (KL 0).
    assert rl.update(batch)["kl"] == pytest.approx(0.0, abs=1e-6)
    with torch.no_grad():  # the policy moves (as an update would move it) ...
        for parameter in rl.weights.parameters["policy"]:
            parameter.add_(0.05 * torch.randn_like(parameter))
    assert not torch.allclose(logprobs_of(rl.weights.module("policy")), warm, atol=1e-3)
    assert torch.allclose(reference_logprobs(), warm, atol=1e-6)  # ... the reference does not
    assert rl.update(batch)["kl"] > 1e-4


@pytest.mark.slow
def test_sft_on_a_graphs_demonstrations_learns_the_selected_nodes_calls(
    tmp_path, smollm2_tokenizer
):
    pytest.importorskip("langgraph")
    from boltzoo.agents.examples import langgraph_sql_graph
    from boltzoo.agents.frameworks import LangGraphPolicy
    from boltzoo.agents.gateway import Gateway
    from boltzoo.envs.sql_v0 import CHECKER_SYSTEM_PROMPT, WRITER_SYSTEM_PROMPT

    env_kwargs = {"agents": ["writer"], "schema_rows": 0}

    def model(turn):  # write a wrong query, have it rejected, rewrite it
        system = turn.observation["messages"][0]["content"]
        if system == WRITER_SYSTEM_PROMPT:
            return "```sql\nSELECT 1\n```"
        if system == CHECKER_SYSTEM_PROMPT:
            return "VERDICT: INCORRECT - wrong"
        return "```sql\nSELECT 2\n```"

    demos = tmp_path / "demos.jsonl"
    with Gateway(ScriptedPolicy(model, smollm2_tokenizer, name="smol")) as gateway:
        policy = LangGraphPolicy(langgraph_sql_graph("sql-v0", "writer", max_rounds=1), gateway)
        episodes = boltzoo.rollout(
            "sql-v0", {"writer": policy}, tasks=[0, 1], progress=False, **env_kwargs
        )
    save_episodes(demos, episodes)
    config = sft_config(
        tmp_path,
        demos,
        env="sql-v0",
        env_kwargs=env_kwargs,
        framework="langgraph-sql-graph",
        train_agents=["rewriter"],
    )
    with SFTTrainer(
        config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer
    ) as trainer:
        assert trainer.run.agents == ["checker", "rewriter", "writer"]
        rewrites = [
            c for e in episodes for c in e.steps[0].action.inner_calls if c.node == "rewriter"
        ]
        assert len(rewrites) == 2
        assert [t.agent for t in trainer.transitions] == ["rewriter", "rewriter"]
        assert [t.response_token_ids for t in trainer.transitions] == [
            c.response_token_ids for c in rewrites
        ]


def test_only_successful_keeps_the_successful_episodes_and_a_used_folder_is_refused(
    tmp_path, smollm2_tokenizer
):
    demos = tmp_path / "demos.jsonl"
    naive = record(tmp_path / "naive.jsonl", {"solver": NaivePolicy()}, range(12), max_turns=1)
    oracle = record(tmp_path / "oracle.jsonl", {"solver": OraclePolicy()}, [0, 1], max_turns=1)
    save_episodes(demos, naive + oracle)
    successes = sum(bool(e.success) for e in naive + oracle)
    assert 2 <= successes < 14
    config = sft_config(tmp_path, demos, env_kwargs={"max_turns": 1}, only_successful=True)
    trainer = SFTTrainer(
        config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer
    )
    assert len(trainer.transitions) == successes
    trainer.train()
    metrics = (tmp_path / "sft" / "metrics.jsonl").read_text()
    model = tiny_model(len(smollm2_tokenizer))
    again = SFTTrainer(config, model=model, tokenizer=smollm2_tokenizer)
    with pytest.raises(RunFolderError, match="holds a run"):
        again.train()  # (not resumed)
    assert (tmp_path / "sft" / "metrics.jsonl").read_text() == metrics
    assert len(load_episodes(demos)) == 14


@pytest.mark.parametrize(
    ("env_id", "env_kwargs"),
    [("math-v0", {"level": "medium"}), ("sql-v0", {}), ("rag-v0", {})],
)
def test_oracle_demonstrations_replay_to_success_in_every_env(tmp_path, env_id, env_kwargs):
    # What boltzoo rollout records is a demonstration: its texts, played again, succeed.
    num_tasks = boltzoo.make(env_id, **env_kwargs).unwrapped.num_tasks
    tasks = [0, num_tasks // 2, num_tasks - 1]
    team = boltzoo.make(env_id, **env_kwargs).unwrapped.possible_agents
    recorded = boltzoo.rollout(
        env_id, {a: OraclePolicy() for a in team}, tasks=tasks, progress=False, **env_kwargs
    )
    save_episodes(tmp_path / "demos.jsonl", recorded)
    demos = {e.task_index: e for e in load_episodes(tmp_path / "demos.jsonl")}

    def replay(turn):
        episode = demos[turn.env.task_index]
        return episode.steps[turn.env.turn_count].action.text

    replayer = ScriptedPolicy(replay)
    replayed = boltzoo.rollout(
        env_id, {a: replayer for a in team}, tasks=tasks, progress=False, **env_kwargs
    )
    assert all(e.success for e in recorded) and all(e.success for e in replayed)
    assert [[s.action.text for s in e.steps] for e in replayed] == [
        [s.action.text for s in e.steps] for e in recorded
    ]


@pytest.mark.parametrize("lora_r", [0, 4])
@pytest.mark.slow
def test_rl_replaying_demonstrations_learns_them_where_no_group_teaches(
    tmp_path, smollm2_tokenizer, lora_r
):
    # A tiny random model never solves math-v0: every group's rewards are equal, every advantage
    # 0, and the policy gradient is nothing. Replayed demonstrations still move the policy, by
    # exactly the warm start's loss on them; without them the weights stay as they were.
    demos = tmp_path / "demos.jsonl"
    record(demos, {"solver": OraclePolicy()}, [0, 1, 2], max_turns=1)
    rl = dict(
        env="math-v0",
        env_kwargs={"max_turns": 1, "format_reward": 0.0},
        model="tiny",
        steps=1,
        tasks_per_step=2,
        group_size=2,
        max_new_tokens=8,
        lr=1e-2,
        lora_r=lora_r,
        save_every=0,
        progress=False,
    )

    def trainer(folder, **replay):
        config = TrainerConfig(output_dir=str(tmp_path / folder), **rl, **replay)
        model = tiny_model(len(smollm2_tokenizer))
        return Trainer(config, model=model, tokenizer=smollm2_tokenizer)

    plain = trainer("plain")
    before = {k: v.clone() for k, v in plain.weights.model.state_dict().items()}
    (metrics,) = plain.train()
    assert metrics["frac_reward_zero_std"] == 1.0 and "replay_loss" not in metrics
    assert all(torch.equal(v, before[k]) for k, v in plain.weights.model.state_dict().items())

    replaying = trainer("replay", replay_demos=str(demos), replay_calls=8)
    calls = replaying.replay["policy"]
    assert len(calls) == 3 and {t.agent for t in calls} == {"solver"}
    start = full_sequence_loss(replaying.weights.module("policy"), calls)
    (metrics,) = replaying.train()
    assert metrics["frac_reward_zero_std"] == 1.0
    # all three calls drawn (replay_calls > 3): the logged loss is theirs before the update
    assert metrics["replay_loss"] == pytest.approx(start, rel=1e-4)
    assert full_sequence_loss(replaying.weights.module("policy"), calls) < start

    # demonstrations without a call of the trained agents are refused, in one line
    team = {"max_turns": 1, "agents": ["solver", "verifier"]}
    with pytest.raises(DatasetError, match="no LLM call of \\['verifier'\\]"):
        Trainer(
            TrainerConfig(
                **(rl | {"env_kwargs": team}),
                output_dir=str(tmp_path / "team"),
                train_agents=["verifier"],
                replay_demos=[str(demos)],
            ),
            model=tiny_model(len(smollm2_tokenizer)),
            tokenizer=smollm2_tokenizer,
        )


def test_a_non_finite_sft_loss_leaves_the_weights_and_is_counted(
    tmp_path, smollm2_tokenizer, monkeypatch
):
    import boltzoo.lightningrl.update as update_module

    real_aggregate = update_module.aggregate
    monkeypatch.setattr(
        update_module, "aggregate", lambda *a, **k: real_aggregate(*a, **k) * float("nan")
    )
    demos = tmp_path / "demos.jsonl"
    record(demos, {"solver": OraclePolicy()}, [0, 1], max_turns=1)
    trainer = SFTTrainer(
        sft_config(tmp_path, demos, env_kwargs={"max_turns": 1}),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )
    before = {k: v.clone() for k, v in trainer.run.weights.model.state_dict().items()}
    ((name, batch),) = trainer.batches(0)
    out = trainer.sft_step(name, batch)
    assert out["skipped_updates"] == 1 and out["sft_loss"] != out["sft_loss"]  # NaN
    assert all(torch.equal(v, before[k]) for k, v in trainer.run.weights.model.state_dict().items())


def test_resuming_a_finished_warm_start_trains_and_evaluates_nothing_again(
    tmp_path, smollm2_tokenizer
):
    demos = tmp_path / "demos.jsonl"
    record(demos, {"solver": OraclePolicy()}, [0, 1])
    config = sft_config(tmp_path, demos, eval_tasks=2, max_new_tokens=4)
    model, tokenizer = tiny_model(len(smollm2_tokenizer)), smollm2_tokenizer
    SFTTrainer(config, model=model, tokenizer=tokenizer).train()
    metrics = (tmp_path / "sft" / "metrics.jsonl").read_text()
    assert sum('"eval_success_rate"' in line for line in metrics.splitlines()) == 2
    again = SFTTrainer(config, model=tiny_model(len(tokenizer)), tokenizer=tokenizer)
    assert again.resume()
    assert again.train() == []
    assert (tmp_path / "sft" / "metrics.jsonl").read_text() == metrics


FRAMEWORK_ORACLES = {  # case -> (framework, env, its agent, env kwargs, the tool its calls use)
    "autogen": ("autogen", "math-v0", "solver", {"level": "easy", "max_turns": 1}, "calculator"),
    "openai-agents": (
        "openai-agents",
        "rag-v0",
        "answerer",
        {"agents": ["answerer"], "retriever": "bm25"},
        "search",
    ),
    # no search with the question first: the agent's own searches find every passage
    "openai-agents-searches-all": (
        "openai-agents",
        "rag-v0",
        "answerer",
        {"agents": ["answerer"], "retriever": "bm25", "question_search": False},
        "search",
    ),
}


@pytest.mark.parametrize("case", sorted(FRAMEWORK_ORACLES))
@pytest.mark.slow
def test_oracle_demonstrations_played_through_a_framework_are_its_tokens(
    tmp_path, smollm2_tokenizer, case
):
    # `boltzoo rollout ENV --policy FRAMEWORK --oracle`: the env's oracle answers each of the
    # framework agent's model calls (tool calls, then the answer), so the recorded calls hold
    # the prompts the framework sent, with its own system message and the tools' results, and
    # the warm start learns exactly those tokens (not the env's own text protocol).
    framework, env_id, agent, env_kwargs, tool = FRAMEWORK_ORACLES[case]
    pytest.importorskip("autogen_agentchat" if framework == "autogen" else "agents")
    from boltzoo.agents.examples import instructions
    from boltzoo.cli import main

    demos = tmp_path / "demos.jsonl"
    flags = [f"-e{k}={json.dumps(v)}" for k, v in env_kwargs.items()]
    command = ["rollout", env_id, "--policy", framework, "--oracle", "--episodes", "4"]
    assert main([*command, *flags, "--split", "train", "--out", str(demos), "--quiet"]) == 0
    episodes = load_episodes(demos)
    assert [e.success for e in episodes] == [True] * 4
    with inspected(env_id, **env_kwargs) as env:
        env_prompt, tasks = env.prompts[agent], env.tasks
    for episode in episodes:
        *tool_calls, final = episode.steps[0].action.inner_calls
        assert tool_calls and all(f'"name": "{tool}"' in c.text for c in tool_calls)
        assert "<tool_call>" not in final.text
        first = smollm2_tokenizer.decode(tool_calls[0].prompt_token_ids)
        assert instructions(env_id, agent) in first and env_prompt not in first
        # the last prompt holds the tool's results, as the env computed them for the framework
        last = smollm2_tokenizer.decode(final.prompt_token_ids)
        assert last.count("tool\n") >= len(tool_calls)
        if env_kwargs.get("question_search") is False:  # no search by the env: the agent's
            assert "(no passages found)" in first  # own searches found every hop's passage
            found = episode.steps[-1].info["supporting_retrieved"]
            assert found == len(tasks[episode.task_index].supporting_ids) >= 2
    calls = [call for e in episodes for call in e.steps[0].action.inner_calls]

    trainer = SFTTrainer(
        sft_config(tmp_path, demos, env=env_id, framework=framework, env_kwargs=env_kwargs),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )
    with trainer:
        learned = sorted((t.prompt_token_ids, t.response_token_ids) for t in trainer.transitions)
    assert learned == sorted((c.prompt_token_ids, c.response_token_ids) for c in calls)
