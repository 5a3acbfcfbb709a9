"""boltzoo.make and the ids in PettingZoo's and Gymnasium's registries."""

import gymnasium
import pettingzoo
import pytest

import boltzoo
from boltzoo.errors import UnknownEnvError


@pytest.mark.parametrize("env_id", boltzoo.registered_envs())
def test_every_env_is_in_both_registries(env_id):
    assert env_id in pettingzoo.aec_registry
    assert env_id in gymnasium.registry
    env = pettingzoo.make("aec", env_id)
    assert isinstance(env.unwrapped, pettingzoo.AECEnv)


def test_short_id_means_the_boltzoo_namespace():
    assert type(boltzoo.make("math-v0").unwrapped) is type(
        boltzoo.make("boltzoo/math-v0").unwrapped
    )


def test_unknown_env_id_is_a_clear_error_with_a_suggestion():
    with pytest.raises(UnknownEnvError, match="Did you mean 'boltzoo/math-v0'"):
        boltzoo.make("boltzoo/maths-v0")
    with pytest.raises(UnknownEnvError, match="registered: boltzoo/math-v0"):
        boltzoo.make("chess")
