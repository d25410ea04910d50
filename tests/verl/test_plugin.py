"""The installed entry point registers AReW in a fresh verl process, and says so loudly when it cannot."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.e2e  # each test imports verl in a fresh process (about 10 s)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def test_entry_point_registers_estimators_and_trainer_on_import_verl():
    result = _run(
        """
        import sys
        assert "arew" not in sys.modules
        import verl  # nothing of arew imported by hand
        from verl.trainer.ppo import core_algos
        from verl.trainer.ppo.v1 import get_trainer_cls
        print("ESTIMATORS", sorted(k for k in core_algos.ADV_ESTIMATOR_REGISTRY if k.startswith("arew_")))
        print("TRAINER", get_trainer_cls("arew").__name__)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "ESTIMATORS ['arew_gae', 'arew_gigpo', 'arew_grpo', 'arew_turn_gae', 'arew_turn_grpo']" in result.stdout
    assert "TRAINER AReWTrainer" in result.stdout


def test_failed_registration_is_loud():
    result = _run(
        """
        import sys
        sys.modules["arew.core.reweight"] = None  # make the plugin's import fail
        import verl
        from verl.trainer.ppo import core_algos
        print("REGISTERED", "arew_gae" in core_algos.ADV_ESTIMATOR_REGISTRY)
        """
    )
    assert "REGISTERED False" in result.stdout
    assert "AReW verl plugin failed to register" in result.stderr
    assert "Traceback" in result.stderr
