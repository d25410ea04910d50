"""Whether this machine can log to W&B, decided from the environment and ~/.netrc alone."""

from __future__ import annotations

import pytest

from arew.metrics.wandb_credentials import has_wandb_credentials


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch, tmp_path):
    """A fresh HOME without ~/.netrc and no API key (tests add what they need)."""
    for name in ("WANDB_API_KEY", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def test_credentials_are_a_key_or_a_netrc_entry_for_the_configured_host(monkeypatch, tmp_path):
    assert not has_wandb_credentials()
    (tmp_path / ".netrc").write_text("machine api.wandb.ai login user password secret\n")
    (tmp_path / ".netrc").chmod(0o600)
    assert has_wandb_credentials()
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")  # a self-hosted server: its own entry
    assert not has_wandb_credentials()
    monkeypatch.setenv("WANDB_API_KEY", "k")
    assert has_wandb_credentials()
