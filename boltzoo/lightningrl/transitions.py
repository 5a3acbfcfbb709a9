"""Transitions: an episode cut into its LLM calls, each with the reward credited to it.

LightningRL trains on single calls. :func:`flatten` walks the episodes (in order), their steps
(in order) and the calls of each step (in order) and makes one :class:`Transition` per LLM call
of the agents being trained: a step whose action has ``inner_calls`` (a framework agent called
the model several times to produce one action) gives one transition per inner call, all with the
step's credit; the outer Completion, which only carries the final text, is not a call. Any other
step gives one transition, its action. An inner call made by a graph node (``Completion.node``)
is the node's transition: node names are agents here, selected by ``train_agents`` like any
agent, and credited with the step's reward.

Token ids and sampling logprobs are read from the Completions. A call without prompt ids gets
its prompt rebuilt from the observation with the tokenizer's chat template (``retokenized=True``;
its response ids and logprobs are kept); a call without response ids is tokenized from its
text, and its logprobs, if any, are dropped with a warning (they cannot be paired).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from boltzoo.agents.base import encode_chat
from boltzoo.episode import Completion, Episode, Step, load_episodes
from boltzoo.errors import DatasetError, shorten
from boltzoo.lightningrl.credit import CreditFn, get_credit


@dataclass
class Transition:
    """One LLM call of one agent: its tokens, its sampling logprobs and its credited reward."""

    agent: str
    task_id: str
    task_index: int
    episode_id: str
    group: int | None  # episode.metadata.get("group"): the rollouts of the same task
    turn: int  # index of the step in the episode (0-based)
    call: int  # index of the LLM call within the step (0 for plain actions)
    prompt_token_ids: list[int]
    response_token_ids: list[int]
    logprobs: list[float] | None  # sampling logprobs, one per response token
    reward: float  # the credited reward
    advantage: float = 0.0
    policy_version: int | None = None
    retokenized: bool = False  # token ids were made from text here (the backend gave none)
    temperature: float | None = None  # from the Completion's sampling_params, if any


def select_agents(agents: Iterable[str], train_agents: str | Sequence[str] | None) -> set[str]:
    """Return the agents to train: all (None), the names given, or those a regex fullmatches."""
    agents = sorted(set(agents))
    if train_agents is None:
        return set(agents)
    if isinstance(train_agents, str):
        try:
            pattern = re.compile(train_agents)
        except re.error as error:
            raise ValueError(
                f"train_agents {train_agents!r} is not a valid regex: {error}"
            ) from None
        selected = {a for a in agents if pattern.fullmatch(a)}
        if not selected:
            raise ValueError(
                f"train_agents regex {train_agents!r} matches none of the agents {agents}"
            )
        return selected
    unknown = [a for a in train_agents if a not in agents]
    if unknown:
        raise ValueError(f"train_agents names unknown agents {unknown}; the agents are {agents}")
    return set(train_agents)


def _calls(action: Completion) -> list[Completion]:
    """Return the LLM calls behind an action: its inner calls if it has any or is an agent's
    answer (which is no call itself), else itself."""
    return list(action.inner_calls) if action.inner_calls or action.agent_answer else [action]


def _caller(call: Completion, step: Step) -> str:
    """Return the agent a call trains: its graph node, else the step's agent."""
    return call.node or step.agent


def _tokens(
    call: Completion, step: Step, inner: bool, tokenizer: Any, where: str
) -> tuple[list[int], list[int], list[float] | None, bool]:
    """Return (prompt ids, response ids, logprobs, retokenized) of one call."""
    if call.has_tokens:
        return list(call.prompt_token_ids), list(call.response_token_ids), call.logprobs, False
    if inner and call.prompt_token_ids is None:
        raise ValueError(
            f"{where}: an inner LLM call has no prompt token ids, and its prompt cannot be rebuilt "
            f"from the episode; record token ids in the framework agent's Completions"
        )
    if tokenizer is None:
        raise ValueError(
            f"{where}: the Completion has no token ids (text {shorten(call.text, 40)}); pass "
            f"tokenizer= to flatten to tokenize it, or use a backend that records token ids"
        )
    prompt = call.prompt_token_ids
    if prompt is None:
        prompt = encode_chat(tokenizer, step.observation["messages"])
    response = call.response_token_ids
    if response is not None:  # the backend's response tokens and their logprobs still hold
        logprobs = call.logprobs
        if logprobs is not None and len(logprobs) != len(response):
            logprobs = None
        return list(prompt), list(response), logprobs, True
    if call.logprobs is not None:
        warnings.warn(
            f"{where}: the Completion has logprobs but no response token ids; it is tokenized "
            "from its text and its logprobs are dropped (they cannot be paired with the tokens)",
            stacklevel=3,
        )
    response = list(tokenizer.encode(call.text, add_special_tokens=False))
    if tokenizer.eos_token_id is not None:
        response.append(tokenizer.eos_token_id)
    return list(prompt), response, None, True


def flatten(
    episodes: Sequence[Episode],
    credit: str | CreditFn = "identical",
    train_agents: str | Sequence[str] | None = None,
    *,
    tokenizer: Any = None,
    gamma: float = 1.0,
    agents: Iterable[str] | None = None,
) -> list[Transition]:
    """Return one Transition per LLM call of the trained agents, with its credited reward.

    Args:
        episodes: the rollouts; failed ones are skipped.
        credit: a rule of :mod:`boltzoo.lightningrl.credit` by name ("identical", "discounted",
            "returns") or a function ``(episode, agent, steps) -> rewards``.
        train_agents: None (all agents), a list of agent names, or a regex fullmatched.
        tokenizer: tokenizes calls recorded without token ids (otherwise they raise).
        gamma: the discount of the "discounted" rule.
        agents: the names ``train_agents`` may select (default: the episodes' agents and the
            graph nodes that made their calls; a trainer gives every agent and node, since a
            node may make no call in a step).
    """
    credit_fn = get_credit(credit, gamma)
    kept = [e for e in episodes if not e.failed]
    if not kept:
        return []
    known = {a for e in kept for a in e.agents} | {
        _caller(call, s) for e in kept for s in e.steps for call in _calls(s.action)
    }
    if agents is not None:
        known |= set(agents)
    selected = select_agents(known, train_agents)

    transitions = []
    for episode in kept:
        credited: dict[int, float] = {}  # step index -> the reward credited to its calls
        # the agents with a selected call: the selected agents, or a graph's selected nodes
        acting = {
            step.agent
            for step in episode.steps
            if any(_caller(call, step) in selected for call in _calls(step.action))
        }
        for agent in sorted(acting):
            steps = [i for i, step in enumerate(episode.steps) if step.agent == agent]
            # Here the episode's return becomes each call's reward.
            rewards = credit_fn(episode, agent, steps)
            if len(rewards) != len(steps):
                raise ValueError(
                    f"credit rule {getattr(credit_fn, '__name__', credit_fn)!r} returned "
                    f"{len(rewards)} rewards for the {len(steps)} steps of {agent!r}"
                )
            credited.update(zip(steps, (float(r) for r in rewards), strict=True))

        for turn, step in enumerate(episode.steps):
            if turn not in credited:
                continue
            inner = bool(step.action.inner_calls)
            for index, call in enumerate(_calls(step.action)):
                if _caller(call, step) not in selected:
                    continue
                where = f"episode {episode.episode_id!r}, step {turn} ({step.agent}), call {index}"
                prompt, response, logprobs, retokenized = _tokens(
                    call, step, inner, tokenizer, where
                )
                if not response:
                    continue
                params = call.sampling_params or step.action.sampling_params
                version = call.policy_version
                transitions.append(
                    Transition(
                        agent=_caller(call, step),
                        task_id=episode.task_id,
                        task_index=episode.task_index,
                        episode_id=episode.episode_id,
                        group=episode.metadata.get("group"),
                        turn=turn,
                        call=index,
                        prompt_token_ids=prompt,
                        response_token_ids=response,
                        logprobs=None if logprobs is None else list(logprobs),
                        reward=credited[turn],
                        policy_version=step.action.policy_version if version is None else version,
                        retokenized=retokenized,
                        temperature=params.get("temperature"),
                    )
                )
    return transitions


def demonstration_transitions(
    episodes: list[Episode],
    train_agents: Any,
    tokenizer: Any,
    only_successful: bool = False,
    agents: Any = None,
) -> list[Transition]:
    """Return one Transition per LLM call of ``train_agents`` in the demonstrations (failed
    episodes skipped; with ``only_successful`` the unsuccessful ones too). Calls recorded
    without token ids are tokenised with ``tokenizer``'s chat template. ``agents``: the names
    ``train_agents`` may select (a graph's nodes included), as :func:`flatten` takes them."""
    kept = [e for e in episodes if not e.failed and (e.success or not only_successful)]
    return flatten(kept, "identical", train_agents, tokenizer=tokenizer, agents=agents)


def by_policy(
    transitions: Iterable[Transition], policy_of: dict[str, str]
) -> dict[str, list[Transition]]:
    """Return policy name -> the transitions of its agents (``policy_of``: agent -> name), in
    their order."""
    grouped: dict[str, list[Transition]] = {}
    for t in transitions:
        grouped.setdefault(policy_of[t.agent], []).append(t)
    return grouped


def read_demonstrations(
    paths: Sequence[str],
    train_agents: Any,
    tokenizer: Any,
    *,
    agents: Any = None,
    only_successful: bool = False,
) -> tuple[list[Transition], list[Episode]]:
    """Read the Episode JSONL files ``paths``; return the LLM calls of ``train_agents`` in
    them (:func:`demonstration_transitions`) and the episodes read.

    Raises:
        DatasetError: no such call in them (every episode failed, or none has those agents).
    """
    episodes = [e for path in paths for e in load_episodes(path)]
    calls = demonstration_transitions(episodes, train_agents, tokenizer, only_successful, agents)
    if not calls:
        successful = ", successful only" if only_successful else ""
        raise DatasetError(
            f"no LLM call of {sorted(train_agents)} to learn from in {list(paths)} "
            f"({len(episodes)} episodes{successful}; failed episodes are skipped)"
        )
    return calls, episodes
