"""Every task declares its options; an unknown, mistyped or out-of-range option fails naming its key."""

import inspect

import pytest

from arew.envs.registry import check_env_options, env_class, task_names

PREFIX = "arew_agent.env_options"


@pytest.mark.parametrize("task", task_names())
def test_declared_defaults_pass_and_come_from_the_constructor(task):
    task_class = env_class(task)
    defaults = {name: p.default for name, p in inspect.signature(task_class.__init__).parameters.items()}
    defaults.update(getattr(task_class, "PASSED_ON_DEFAULTS", {}))  # options a class hands to another component
    values = {name: defaults[name] for name in task_class.OPTIONS}  # KeyError: declared, not accepted
    assert all(v is not inspect.Parameter.empty for v in values.values())
    check_env_options(task, values)
    check_env_options(task, {})


@pytest.mark.parametrize(
    "task, options, message",
    [
        ("pe-g-s2", {"reward_rul": "paper"}, f"{PREFIX}.reward_rul: not an option of PreferenceEnv; valid options: ['feedback_ablation'"),
        ("pe-g-s2", {"reward_rule": "median"}, f"{PREFIX}.reward_rule: must be one of"),
        ("pe-g-s2", {"user": "llm"}, f"{PREFIX}.user: not an option of PreferenceEnv"),  # PE has no user
        ("pe-f-d6", {"replay_samples": 0}, f"{PREFIX}.replay_samples: must be >= 1, got 0"),
        ("mediq", {"reward_rule": "reference"}, f"{PREFIX}.reward_rule: not an option of MediQEnv"),  # another task's option
        ("mediq", {"user_timout": 5}, f"{PREFIX}.user_timout: not an option of MediQEnv; valid options: .*'user_timeout'"),
        ("mediq", {"user_timeout": "abc"}, f"{PREFIX}.user_timeout: expected a finite number, got 'abc'"),
        ("mediq", {"user": "llm", "user_timeout": float("nan")}, f"{PREFIX}.user_timeout: expected a finite number, got nan"),
        ("mediq", {"counterfactual_as": "yes"}, f"{PREFIX}.counterfactual_as: expected true or false, got 'yes'"),
        ("mediq", {"cf_as_max_overlap": 1.5}, f"{PREFIX}.cf_as_max_overlap: must be >= 0 and <= 1, got 1.5"),
        ("flodial-hard", {"bt_saturation": 1}, f"{PREFIX}.bt_saturation: expected true or false, got 1"),
        ("flodial-easy", {"user": "human"}, f"{PREFIX}.user: must be one of"),
        ("tau2-solo", {"max_turns": 0}, f"{PREFIX}.max_turns: must be >= 1 and <= 200, got 0"),
        ("tau2-solo", {"reward": "partial"}, f"{PREFIX}.reward: must be one of"),
        ("tau2-solo", {"user_timeout": 5}, f"{PREFIX}.user_timeout: not an option of Tau2Env"),  # the customer's are customer_*
        ("tau2-dual", {"critique_repeat": 1}, f"{PREFIX}.critique_repeat: expected true or false, got 1"),
        ("tau2-dual", {"customer": "human"}, f"{PREFIX}.customer: must be one of"),
        ("tau2-dual", {"customer_url": "localhost:8000"}, f"{PREFIX}.customer_url: must be an http"),
    ],
)
def test_invalid_options_name_their_key(task, options, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        check_env_options(task, options)


def test_prefixed_options_follow_the_config_declarations():
    from arew.envs.options import PrefixedOptions
    from arew.envs.users import USER_OPTIONS, LLMUserConfig

    flat = PrefixedOptions(LLMUserConfig, "user_")
    assert flat.options["user_timeout"] is USER_OPTIONS["user_timeout"] and flat.options["user_timeout"].above == 0
    assert flat.defaults["user_timeout"] == 15.0 and flat.defaults["user_api_key"] is None
    assert flat.build({"user_timeout": 5}).timeout == 5.0  # an int for a float field
    with pytest.raises(ValueError, match=rf"^{PREFIX}\.user_fallback: must be one of"):
        flat.build({"user_fallback": "maybe"}, PREFIX)
    with pytest.raises(ValueError, match=r"^user_max_tokens: must be >= 1, got 0"):
        flat.build({"user_max_tokens": 0})
    with pytest.raises(TypeError, match="user_temprature"):
        flat.build({"user_temprature": 0.5})
