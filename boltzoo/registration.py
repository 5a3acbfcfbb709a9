"""The env registry, open as Gymnasium's: ``boltzoo.register``, ``boltzoo.make``,
``boltzoo.make_gym``, and the same ids in PettingZoo's and Gymnasium's registries
(``pettingzoo.make("aec", "boltzoo/math-v0")``, ``gymnasium.make("boltzoo/math-v0",
agent="solver")``).

An env gets an id three ways, and then works wherever an id does (``boltzoo eval/train/sft/
rollout``, the trainer, Ray workers):

* ``boltzoo.register("myorg/units-v0", entry_point="my_pkg.envs:env", **default_kwargs)`` in
  your code (Ray workers are sent the registration with their jobs);
* an installed package's entry point in the ``boltzoo.envs`` group, the name being the id and
  the value the env factory (``pyproject.toml``: ``[project.entry-points."boltzoo.envs"]`` then
  ``"myorg/units-v0" = "my_pkg.envs:env"``), registered when boltzoo is imported;
* ``module:callable`` itself as the id (``boltzoo eval my_pkg.envs:env``), registered on first use.

An entry point (``"module:callable"`` or a callable) returns an AEC env when called with the
env's keyword arguments; the ones given to ``make`` go on top of the registered defaults.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.metadata
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import gymnasium.error
import pettingzoo
import pettingzoo.env_registry.exceptions
from pettingzoo import AECEnv

from boltzoo.errors import UnknownEnvError, shorten

ENTRY_POINT_GROUP = "boltzoo.envs"
# what Gymnasium's and PettingZoo's registries accept: [namespace/]name[-vN]
_ID_FORMAT = re.compile(r"(?:[\w:.-]+/)?[\w:.-]+?(?:-v\d+)?")


@dataclass(frozen=True)
class EnvSpec:
    """A registered env: its id, what makes it, and the keyword arguments it is made with."""

    id: str
    entry_point: str | Callable[..., AECEnv]  # "module:callable" or the callable itself
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def factory(self) -> Callable[..., AECEnv]:
        """Return the callable that makes the env (importing its module if need be)."""
        if callable(self.entry_point):
            return self.entry_point
        return _load_callable(self.entry_point, self.id)

    def make(self, **kwargs: Any) -> AECEnv:
        """Return a new env, made with the registered kwargs and ``kwargs`` on top."""
        env = self.factory()(**{**self.kwargs, **kwargs})
        if not isinstance(env, AECEnv):
            raise TypeError(
                f"the entry point of {self.id!r} returned {type(env).__name__}, not a PettingZoo "
                "AECEnv"
            )
        unwrapped = env.unwrapped
        # Episodes name the id the env was made as (a TaskEnv, or a bundled env registered again
        # with other defaults, has no id of its own).
        if hasattr(type(unwrapped), "env_id"):
            unwrapped.env_id = self.id
        return env


_BUNDLED = ("math-v0", "sql-v0", "rag-v0", "tokens-v0", "prompts-v0")
_SPECS: dict[str, EnvSpec] = {
    f"boltzoo/{name}": EnvSpec(f"boltzoo/{name}", f"boltzoo.envs.{name.replace('-', '_')}:env")
    for name in _BUNDLED
}
_entry_points_loaded = False


def _load_callable(entry_point: str, env_id: str) -> Callable[..., AECEnv]:
    module_name, _, attribute = entry_point.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UnknownEnvError(
            f"env {shorten(env_id)}: cannot import {module_name!r} ({error})"
        ) from None
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise UnknownEnvError(f"env {shorten(env_id)}: {module_name!r} has no {attribute!r}")
    if not callable(target):
        raise UnknownEnvError(f"env {shorten(env_id)}: {entry_point!r} is not callable")
    return target


def _is_entry_point(text: str) -> bool:
    module, colon, attribute = text.partition(":")
    names = [*module.split("."), *attribute.split(".")]
    return bool(colon) and all(n.isidentifier() for n in names)


def register(env_id: str, entry_point: str | Callable[..., AECEnv], **kwargs: Any) -> EnvSpec:
    """Register an env under ``env_id``, in boltzoo's, PettingZoo's and Gymnasium's registries.

    Args:
        env_id (str): the id, namespaced and versioned by convention (``"myorg/units-v0"``).
        entry_point (str | Callable): ``"module:callable"`` (imported when the env is first made)
            or a callable; called with the env's keyword arguments, it returns a PettingZoo
            ``AECEnv`` (e.g. a :class:`boltzoo.envs.TaskEnv`).
        **kwargs: the env's default keyword arguments (``make`` may override each).

    Returns:
        EnvSpec: what was registered. Registering an id again replaces it, with a warning when
        the new registration differs (as Gymnasium does).
    """
    if not isinstance(env_id, str) or not env_id.strip():
        raise ValueError(f"an env id is a non-empty str, got {shorten(env_id)}")
    if isinstance(entry_point, str):
        if not _is_entry_point(entry_point):
            raise ValueError(
                f"entry_point={entry_point!r} must be 'module:callable' (e.g. "
                "'my_pkg.envs:env') or a callable"
            )
    elif not callable(entry_point):
        raise TypeError(f"entry_point must be 'module:callable' or a callable, got {entry_point!r}")
    spec = EnvSpec(env_id, entry_point, dict(kwargs))
    old = _SPECS.get(env_id)
    _register_with_pettingzoo_and_gymnasium(env_id)
    if old is not None and old != spec:
        warnings.warn(
            f"boltzoo: env {env_id!r} registered again; the new one replaces it", stacklevel=2
        )
    _SPECS[env_id] = spec
    return spec


def _load_entry_points() -> None:
    """Register the envs of installed packages (the ``boltzoo.envs`` entry-point group), once."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if point.name in _SPECS:
            if _SPECS[point.name].entry_point != point.value:
                warnings.warn(
                    f"boltzoo: the entry point {point.name!r} = {point.value!r} (from "
                    f"{getattr(point.dist, 'name', 'a package')}) is already registered; skipped",
                    stacklevel=2,
                )
            continue
        if not _is_entry_point(point.value):
            warnings.warn(
                f"boltzoo: the entry point {point.name!r} = {point.value!r} is not "
                "'module:callable'; skipped",
                stacklevel=2,
            )
            continue
        try:
            _register_with_pettingzoo_and_gymnasium(point.name)
        except ValueError as error:  # one package's bad id must not break `import boltzoo`
            warnings.warn(f"boltzoo: {error}; skipped", stacklevel=2)
            continue
        _SPECS[point.name] = EnvSpec(point.name, point.value)


def registered_envs() -> list[str]:
    """Return the ids of every registered env (bundled, registered, installed)."""
    _load_entry_points()
    return sorted(_SPECS)


def resolve_env_id(env_id: str) -> str:
    """Return the full registered id for ``env_id``: ``"math-v0"`` means ``"boltzoo/math-v0"``,
    and ``"module:callable"`` is registered under that id on first use."""
    _load_entry_points()
    if isinstance(env_id, str):
        if env_id in _SPECS:
            return env_id
        if f"boltzoo/{env_id}" in _SPECS:
            return f"boltzoo/{env_id}"
        if _is_entry_point(env_id):
            _load_callable(env_id, env_id)  # a clear error now, not at the first episode
            register(env_id, env_id)
            return env_id
    close = difflib.get_close_matches(str(env_id), registered_envs(), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownEnvError(
        f"no boltzoo env {shorten(env_id)}; registered: {', '.join(registered_envs())} (or give "
        f"'module:callable', or register one with boltzoo.register).{hint}"
    )


def env_spec(env_id: str) -> EnvSpec:
    """Return the registration of ``env_id`` (resolved as :func:`resolve_env_id` does)."""
    return _SPECS[resolve_env_id(env_id)]


def ensure_registered(spec: EnvSpec) -> None:
    """Register ``spec`` here as the driver has it (what a Ray worker does with its jobs' env:
    a registration made or changed in the driver after the worker started reaches it)."""
    _load_entry_points()
    _register_with_pettingzoo_and_gymnasium(spec.id)
    _SPECS[spec.id] = spec


def make(env_id: str, **kwargs: Any) -> AECEnv:
    """Return a new env (a PettingZoo AEC env) for ``env_id``, created with ``kwargs`` on top of
    its registered defaults."""
    return env_spec(env_id).make(**kwargs)


@contextlib.contextmanager
def inspected(env_id: str, **kwargs: Any) -> Iterator[Any]:
    """Yield the unwrapped env that ``make`` returns, to read its tasks, agents or prompts, and
    close it after (an env may hold a database connection, a span, an index)."""
    env = make(env_id, **kwargs)
    try:
        yield env.unwrapped
    finally:
        env.close()


def make_gym(
    env_id: str,
    agent: str | None = None,
    policies: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> gymnasium.Env:
    """Return one agent of ``env_id`` as a ``gymnasium.Env``; ``policies`` act for the others.

    ``agent`` may be left out when the workflow has one agent. ``kwargs`` go to the env.
    """
    from boltzoo.envs.single_agent import SingleAgentEnv

    aec_env = make(env_id, **kwargs)
    if agent is None:
        agents = aec_env.unwrapped.possible_agents
        if len(agents) != 1:
            raise ValueError(f"this workflow has agents {agents}: say which one with agent=...")
        agent = agents[0]
    return SingleAgentEnv(aec_env, agent=agent, policies=policies)


def _entry_point(env_id: str) -> Callable[..., AECEnv]:
    def create(**kwargs: Any) -> AECEnv:
        return make(env_id, **kwargs)

    create.__name__ = f"make_{env_id.split('/')[-1].replace('-', '_')}"
    return create


def _register_with_pettingzoo_and_gymnasium(env_id: str) -> None:
    """Register ``env_id`` with both (pointing back here, so they always make what boltzoo's
    registry says now); raise ValueError for an id they cannot take."""
    if env_id in pettingzoo.aec_registry and env_id in gymnasium.registry:
        return
    if not _ID_FORMAT.fullmatch(env_id):
        raise ValueError(
            f"env id {env_id!r} is not [namespace/]name[-vN] (letters, digits, '_', '-', '.', "
            "':'), as PettingZoo and Gymnasium take ids"
        )
    try:
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id, entry_point="boltzoo.registration:make_gym", kwargs={"env_id": env_id}
            )
        if env_id not in pettingzoo.aec_registry:
            pettingzoo.register("aec", env_id, entry_point=_entry_point(env_id))
    except (
        gymnasium.error.Error,
        pettingzoo.env_registry.exceptions.PettingZooRegistryError,
    ) as error:
        # e.g. "o/x" after "o/x-v0": Gymnasium keeps one unversioned name per versioned one
        raise ValueError(f"env id {env_id!r}: {error}") from None


def register_envs() -> None:
    """Register every boltzoo env id (bundled and installed) with PettingZoo ("aec") and
    Gymnasium (the single-agent view)."""
    for env_id in registered_envs():
        _register_with_pettingzoo_and_gymnasium(env_id)
