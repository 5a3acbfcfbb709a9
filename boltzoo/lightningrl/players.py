"""Who learns in a training run (``who_learns``), and who plays each env agent when it is not
the sampler itself:

* ``framework``: each trained agent is a framework agent (AutoGen, the Agents SDK, LangGraph)
  whose model calls reach its policy's sampler through a gateway (one per policy name);
* a LangGraph :class:`~boltzoo.agents.frameworks.NodeGraph` plays an env agent node by node:
  each node calls its own policy, or the frozen initial model (through a gateway of its own);
* ``agent_command`` / ``agent_service``: one agent program plays every env agent; one gateway
  routes each name it calls the model as to that name's sampler.

Each function adds the gateways it starts to ``gateways`` as it goes (so that a failure half way
leaves them where the trainer's ``close()`` stops them) and returns agent -> the policy that
plays it, which the trainer hands to ``Samplers.set_agent_policies``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from boltzoo.errors import ConfigError
from boltzoo.lightningrl.config import TrainerConfig
from boltzoo.lightningrl.samplers import FROZEN, Samplers
from boltzoo.lightningrl.transitions import select_agents


def who_learns(
    config: TrainerConfig, env_id: str, env_agents: list[str], graphs: Mapping[str, Any]
) -> tuple[list[str], set[str], dict[str, str]]:
    """Return the names that can learn (the env's agents, a graph-played agent replaced by its
    nodes, and the roles an agent program calls the model as), those that do
    (``train_agents``), and agent -> policy name for those (``policy_map``, else ``"policy"``).

    Raises:
        ValueError: ``policy_map`` names an agent there is not.
        ConfigError: ``policy_map`` names an agent that does not learn (it would act with the
            frozen initial model, not a policy); ``frozen_policy`` names no policy of the run,
            or every agent learns.
    """
    nodes = {node for graph in graphs.values() for node in graph.nodes}
    roles = set(config.agent_roles)
    agents = sorted((set(env_agents) - set(graphs)) | nodes | roles)
    train_agents = select_agents(agents, config.train_agents)
    unknown = set(config.policy_map) - set(agents)
    if unknown:
        raise ValueError(
            f"policy_map names agents {sorted(unknown)} that {env_id} does not have "
            f"(its agents: {agents})"
        )
    untrained_mapped = set(config.policy_map) - train_agents
    if untrained_mapped:
        raise ConfigError(
            f"policy_map names agents that do not learn: {sorted(untrained_mapped)} (train "
            f"agents: {sorted(train_agents)}); add them to train_agents or leave them out"
        )
    policy_of = {a: config.policy_map.get(a, "policy") for a in sorted(train_agents)}
    frozen = getattr(config, "frozen_policy", None)
    if frozen is not None and train_agents == set(agents):
        raise ConfigError(
            f"frozen_policy={frozen!r}: every agent learns ({agents}), none acts frozen; "
            "leave some out of train_agents, or frozen_policy out"
        )
    if frozen is not None and frozen not in policy_of.values():
        raise ConfigError(
            f"frozen_policy={frozen!r} is not a policy of this run: "
            f"{sorted(set(policy_of.values()))}"
        )
    return agents, train_agents, policy_of


def node_graphs(
    framework: str, env_id: str, env_agents: list[str], builders: Mapping[str, Any]
) -> dict[str, Any]:
    """Return env agent -> NodeGraph: the graphs in ``builders``, and with a bundled graph as
    ``framework``, that graph for every env agent.

    Raises:
        ValueError: graphs with a framework other than LangGraph, graphs for agents the env
            does not have, or plain builders beside a bundled graph.
    """
    from boltzoo.agents import examples

    graphs = {agent: b for agent, b in builders.items() if getattr(b, "nodes", None)}
    if graphs and framework not in ("langgraph", *examples.GRAPHS):
        raise ValueError(
            f"the graphs in agent_builders ({sorted(graphs)}) need framework='langgraph', "
            f"not {framework!r}"
        )
    unknown = set(graphs) - set(env_agents)
    if unknown:
        raise ValueError(
            f"agent_builders gives graphs for {sorted(unknown)}, which {env_id} does not "
            f"have (its agents: {env_agents})"
        )
    if framework in examples.GRAPHS:
        plain = set(builders) - set(graphs)
        if plain:
            raise ValueError(
                f"framework={framework!r} plays every agent with its bundled graph; "
                f"agent_builders for {sorted(plain)} must be graphs (NodeGraph) too"
            )
        bundled = examples.EXAMPLES[framework]
        for agent in env_agents:
            graphs.setdefault(agent, bundled(env_id, agent))
    return graphs


def framework_players(
    framework: str,
    env_id: str,
    env_agents: list[str],
    builders: Mapping[str, Any],
    graphs: Mapping[str, Any],
    policy_of: Mapping[str, str],
    sampling: Samplers,
    gateways: dict[str, Any],
) -> dict[str, Any]:
    """Start a gateway per policy name in front of its sampler; return env agent -> its
    framework agent (``builders``' or the bundled example) or graph calling them.

    Raises:
        ValueError: builders for agents that are not trained.
    """
    from boltzoo.agents import examples, frameworks
    from boltzoo.agents.gateway import Gateway

    adapter, example = frameworks.ADAPTERS[framework], examples.EXAMPLES[framework]
    unknown = set(builders) - set(policy_of) - set(graphs)
    if unknown:
        raise ValueError(f"agent_builders names agents that are not trained: {sorted(unknown)}")
    for name in sorted(set(policy_of.values())):
        gateways[name] = Gateway(sampling.trained[name], model_name=name).start()
    players: dict[str, Any] = {}
    for agent, name in policy_of.items():
        if agent in env_agents and agent not in graphs:
            build = builders.get(agent) or example(env_id, agent)
            players[agent] = adapter(build, gateways[name])
    for agent, graph in graphs.items():
        # each node calls its own policy, or the frozen initial model
        if FROZEN not in gateways and set(graph.nodes) - set(policy_of):
            gateways[FROZEN] = Gateway(sampling.frozen, model_name=FROZEN).start()
        node_gateways = {node: gateways[policy_of.get(node, FROZEN)] for node in graph.nodes}
        # the graph's own label (model, version): its first trained node's policy
        first = next((n for n in graph.nodes if n in policy_of), graph.nodes[0])
        players[agent] = frameworks.LangGraphPolicy(
            graph, node_gateways[first], node_gateways=node_gateways
        )
    return players


def program_players(
    config: TrainerConfig,
    agents: list[str],
    env_agents: list[str],
    policy_of: Mapping[str, str],
    sampling: Samplers,
    gateways: dict[str, Any],
) -> tuple[Any, dict[str, Any]]:
    """Start the agent program (``agent_command`` or ``agent_service``) behind one gateway that
    routes each name it calls the model as (env agents and ``agent_roles``) to its policy's
    sampler, or to the frozen initial model's for names that are not trained; return the
    program (its ``close()`` stops its hub) and env agent -> the program."""
    from boltzoo.agents.programs import agent_program, program_gateway

    named = sampling.named()
    routes = {agent: named[policy_of.get(agent, FROZEN)] for agent in agents}
    api_key = os.environ.get("BOLTZOO_API_KEY")
    service = config.agent_service
    host = service.rpartition(":")[0].strip("[]") if service else None
    gateway = program_gateway(
        None, host or "127.0.0.1", api_key, routes=routes, model_name=config.model
    )
    gateways["@program"] = gateway
    program = agent_program(
        gateway,
        command=config.agent_command,
        service=service,
        timeout_s=config.agent_timeout_s,
        concurrency=config.agent_concurrency,
        api_key=api_key,
    )
    if service:
        print(f"agent services claim turns at {program.claim_url}", flush=True)
    return program, {agent: program for agent in env_agents}


@contextlib.contextmanager
def paused(gateways: Mapping[str, Any]) -> Iterator[None]:
    """Hold the gateways' new calls within the block (the weights change there): none is
    sampled by half-updated weights, and calls in flight finish first."""
    with contextlib.ExitStack() as stack:
        for gateway in gateways.values():
            stack.enter_context(gateway.paused())
        yield
