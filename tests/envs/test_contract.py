"""Every bundled env keeps the env contract that check_env checks (what users' envs must too)."""

import pytest

from boltzoo.envs import BoltzooEnv, check_env
from boltzoo.registration import make

BUNDLED = {
    "boltzoo/math-v0": {"agents": ("solver", "verifier")},
    "boltzoo/sql-v0": {"agents": ("writer", "checker", "rewriter")},
    "boltzoo/rag-v0": {"retriever": "bm25"},
    "boltzoo/tokens-v0": {},
    "boltzoo/prompts-v0": {},
}


@pytest.mark.parametrize("env_id", sorted(BUNDLED))
def test_every_bundled_env_keeps_the_contract(env_id):
    passed = check_env(env_id, **BUNDLED[env_id])
    assert "pettingzoo.test.api_test" in passed
    assert isinstance(make(env_id, **BUNDLED[env_id]).unwrapped, BoltzooEnv)
    if env_id != "boltzoo/prompts-v0":  # judged by what its agent reports: no oracle
        assert "the oracle: 4/4 tasks succeeded" in passed


def test_the_list_above_is_every_bundled_env():
    from boltzoo.registration import registered_envs

    assert set(BUNDLED) == {e for e in registered_envs() if e.startswith("boltzoo/")}
