"""boltzoo.make and the ids in PettingZoo's and Gymnasium's registries."""

import gymnasium
import pettingzoo
import pytest

import boltzoo
from boltzoo import registration
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
    with pytest.raises(UnknownEnvError, match="registered: .*boltzoo/math-v0"):
        boltzoo.make("chess")


def test_register_makes_an_env_with_its_defaults_under_its_id_everywhere():
    spec = boltzoo.register("tests/math-hard-v0", "boltzoo.envs.math_v0:env", level="hard")
    assert spec.kwargs == {"level": "hard"} and "tests/math-hard-v0" in boltzoo.registered_envs()
    env = boltzoo.make("tests/math-hard-v0").unwrapped
    assert env.env_id == "tests/math-hard-v0" and env.tasks[0].level == "hard"
    assert boltzoo.make("tests/math-hard-v0", level="easy").unwrapped.tasks[0].level == "easy"
    assert pettingzoo.make("aec", "tests/math-hard-v0").unwrapped.tasks[0].level == "hard"
    single = gymnasium.make("tests/math-hard-v0", agent="solver")
    assert single.unwrapped.aec_env.unwrapped.env_id == "tests/math-hard-v0"


def test_registering_again_replaces_with_a_warning_and_bad_entry_points_are_refused():
    boltzoo.register("tests/again-v0", "boltzoo.envs.tokens_v0:env")
    with pytest.warns(UserWarning, match="registered again"):
        boltzoo.register("tests/again-v0", "boltzoo.envs.tokens_v0:env", num_tasks=3)
    assert boltzoo.make("tests/again-v0").unwrapped.num_tasks == 3
    with pytest.raises(ValueError, match="'module:callable'"):
        boltzoo.register("tests/bad-v0", "boltzoo.envs.tokens_v0")
    with pytest.raises(TypeError, match="or a callable"):
        boltzoo.register("tests/bad-v0", 42)
    boltzoo.register("tests/not-an-env-v0", dict)
    with pytest.raises(TypeError, match="returned dict, not a PettingZoo AECEnv"):
        boltzoo.make("tests/not-an-env-v0")


def test_module_callable_is_an_id_of_its_own():
    env = boltzoo.make("boltzoo.envs.tokens_v0:env", num_tasks=5).unwrapped
    assert env.env_id == "boltzoo.envs.tokens_v0:env" and env.num_tasks == 5
    with pytest.raises(UnknownEnvError, match="cannot import 'no_such_module'"):
        boltzoo.make("no_such_module:env")
    with pytest.raises(UnknownEnvError, match="has no 'nothing'"):
        boltzoo.make("boltzoo.envs.tokens_v0:nothing")
    with pytest.raises(UnknownEnvError, match="boltzoo.register"):
        boltzoo.make("chess-v0")


def test_an_installed_packages_entry_point_registers_its_env(tmp_path, monkeypatch):
    # What `pip install` leaves: a module and a .dist-info with entry_points.txt on sys.path.
    (tmp_path / "my_envs.py").write_text(
        "from boltzoo.envs.tokens_v0 import env as tokens\n"
        "def env(**kwargs):\n    return tokens(num_tasks=7, **kwargs)\n"
    )
    info = tmp_path / "my_envs-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-envs\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[boltzoo.envs]\ntests/installed-v0 = my_envs:env\ntests/bad id = my_envs:env\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registration, "_entry_points_loaded", False)
    monkeypatch.setattr(registration, "_SPECS", dict(registration._SPECS))
    with pytest.warns(UserWarning, match="'tests/bad id' is not"):  # skipped, import goes on
        assert "tests/installed-v0" in boltzoo.registered_envs()
    assert boltzoo.make("tests/installed-v0").unwrapped.num_tasks == 7
    assert pettingzoo.make("aec", "tests/installed-v0").unwrapped.num_tasks == 7


def test_a_workers_registration_follows_the_drivers_latest():
    boltzoo.register("tests/changed-v0", "boltzoo.envs.tokens_v0:env", num_tasks=1)
    newer = registration.EnvSpec("tests/changed-v0", "boltzoo.envs.tokens_v0:env", {"num_tasks": 9})
    registration.ensure_registered(newer)  # what a worker does with a job's spec
    assert boltzoo.make("tests/changed-v0").unwrapped.num_tasks == 9


def test_an_id_gymnasium_cannot_take_is_a_clear_error_and_registers_nothing():
    boltzoo.register("tests/twin-v0", "boltzoo.envs.tokens_v0:env")
    with pytest.raises(ValueError, match="env id 'tests/twin'"):
        boltzoo.register("tests/twin", "boltzoo.envs.tokens_v0:env")
    assert "tests/twin" not in boltzoo.registered_envs()
