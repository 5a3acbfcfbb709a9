"""The choice fields' one list: the config's Literal types, its checks, the command line and the
code's tables all agree."""

from __future__ import annotations

import pytest

from boltzoo.cli import build_parser
from boltzoo.lightningrl.advantages import ESTIMATORS, GROUP_BY
from boltzoo.lightningrl.config import SFTConfig, TrainerConfig, choices
from boltzoo.lightningrl.credit import CREDIT_RULES
from boltzoo.lightningrl.loss import AGGREGATIONS, KL_ESTIMATORS


def test_the_code_tables_are_the_config_choices():
    allowed = choices(TrainerConfig)
    assert allowed["estimator"] == ESTIMATORS
    assert allowed["group_by"] == GROUP_BY
    assert allowed["credit"] == CREDIT_RULES
    assert allowed["kl_estimator"] == KL_ESTIMATORS and allowed["aggregation"] == AGGREGATIONS
    frameworks = pytest.importorskip("boltzoo.agents.frameworks")
    examples = pytest.importorskip("boltzoo.agents.examples")
    assert set(allowed["framework"]) == {None, *frameworks.ADAPTERS} == {None, *examples.EXAMPLES}


@pytest.mark.parametrize("config_class", [TrainerConfig, SFTConfig])
def test_every_choice_field_refuses_other_values_and_the_cli_offers_its_list(config_class):
    command = "train" if config_class is TrainerConfig else "sft"
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    flags = {a.dest: a for a in sub._actions}
    for name, allowed in choices(config_class).items():
        with pytest.raises(ValueError, match=name):
            config_class(**{name: "nonsense"})
        assert flags[name].choices == [v for v in allowed if v is not None]
        for value in allowed:
            config_class(**{name: value})  # every listed value is accepted


def test_vllm_sampling_with_top_p_is_refused():
    with pytest.raises(ValueError, match="top_p"):
        TrainerConfig(sampler="vllm", top_p=0.9)
    TrainerConfig(sampler="copy", top_p=0.9)


def test_a_setting_that_does_nothing_in_this_setting_says_so_once(monkeypatch):
    import warnings

    from boltzoo.lightningrl import config as config_module
    from boltzoo.lightningrl.config import warn_inert_settings

    monkeypatch.setattr(config_module, "_WARNED", set())  # (as in a fresh process)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        TrainerConfig(gamma=0.5, sampler="shared", sampler_precision="fp32")
        TrainerConfig(gamma=0.5)  # the same again: said once a process
        TrainerConfig(gamma=0.5, credit="discounted", sampler="copy", sampler_precision="fp32")
        TrainerConfig()
    assert [str(w.message) for w in caught] == [
        "gamma=0.5 does nothing unless credit='discounted'",
        "sampler_precision='fp32' does nothing unless sampler='copy' or 'vllm'",
    ]
    assert warn_inert_settings(TrainerConfig(lora_r=0, lora_alpha=8.0)) == [
        "lora_alpha=8.0 does nothing unless lora_r > 0"
    ]
    assert warn_inert_settings(TrainerConfig(lora_r=4, lora_alpha=8.0)) == []


def test_every_config_field_is_in_one_help_group_the_core_first():
    import dataclasses

    from boltzoo.lightningrl.config import FIELD_GROUPS, SFTConfig

    listed = [name for names in FIELD_GROUPS.values() for name in names]
    assert len(listed) == len(set(listed))  # one group each
    for config in (TrainerConfig, SFTConfig):
        assert {f.name for f in dataclasses.fields(config)} <= set(listed), config
    assert next(iter(FIELD_GROUPS)) == "the run" and "lr" in FIELD_GROUPS["the run"]
