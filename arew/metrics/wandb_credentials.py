"""Whether this machine has W&B credentials, checked without the network (and without importing wandb).

The trainer uses it to log offline instead of stopping a run; ``arew dashboard`` to refuse early with
a message instead of a traceback from deep inside the W&B client.
"""

from __future__ import annotations

import netrc
import os
from urllib.parse import urlparse

DEFAULT_HOST = "https://api.wandb.ai"
HOW_TO_LOG_IN = "run `wandb login` (it writes ~/.netrc) or set WANDB_API_KEY"


def wandb_host() -> str:
    """The W&B server's host name (``WANDB_BASE_URL`` for a self-hosted server)."""
    return urlparse(os.environ.get("WANDB_BASE_URL") or DEFAULT_HOST).hostname or "api.wandb.ai"


def has_wandb_credentials() -> bool:
    """An API key in ``WANDB_API_KEY`` or a ``~/.netrc`` entry for the W&B host (what ``wandb login`` writes)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return bool(netrc.netrc().authenticators(wandb_host()))
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False
