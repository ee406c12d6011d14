"""Whether an address names only this machine: the one test the settings, the token validator, the
remote client and the embedded server all make before trusting plain http or an open port."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``127.0.0.0/8``, ``::1`` with or without brackets,
    ``localhost``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False
