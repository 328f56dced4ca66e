"""Connecting the driver (this process) to a Ray cluster.

Addresses: ``auto`` (a cluster this machine belongs to, started with ``ray start``),
``ray://HOST:PORT`` (Ray Client, the head's client server, default port 10001) or
``HOST:PORT`` (the head's GCS, default port 6379, from a machine of the cluster).

Token authentication: Ray 2.59 and later start local clusters with token authentication,
and every process that talks to the cluster then needs its token.  Ray finds it in
``RAY_AUTH_TOKEN``, the file named by ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``
(``ray get-auth-token`` on the head prints it).  ``auto`` enables token mode by itself when a
token is found; for an explicit address Ray leaves it off, so :func:`connect` turns it on when a
token is available and ``RAY_AUTH_MODE`` is unset.  A cluster that rejects the driver is a
one-line error saying where the token goes.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from pathlib import Path

__all__ = ["ClusterError", "connect", "parse_address", "token_available", "require_ray", "use_token_mode",
           "check_reachable"]

log = logging.getLogger("vapipe.cluster")

_ADDRESS = re.compile(r"^(auto|ray://[A-Za-z0-9_.\-\[\]:]+:\d+|[A-Za-z0-9_.\-\[\]:]+:\d+)$")


class ClusterError(ValueError):
    """A cluster cannot be reached or used; the message is one line naming the address."""


def require_ray() -> object:
    """The ``ray`` module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ClusterError("--cluster needs Ray: pip install 'vapipe[cluster]' (or pip install ray)") from None
    return ray


def parse_address(address: str) -> str:
    """``address`` checked: auto, ray://HOST:PORT or HOST:PORT."""
    text = address.strip()
    if not _ADDRESS.match(text):
        raise ClusterError(f"--cluster {address!r}: expected ray://HOST:PORT (Ray Client), HOST:PORT (the head's "
                           "GCS) or auto (the cluster this machine belongs to)")
    return text


def token_available() -> bool:
    """Whether a Ray authentication token is set up for this process."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return Path(path).is_file()
    return (Path.home() / ".ray" / "auth_token").is_file()


def use_token_mode() -> None:
    """Token authentication on for this process and the processes it starts: ``RAY_AUTH_MODE=token``,
    Ray's configuration read again (Ray reads it once, when it is imported) and its cached token
    dropped (the token may have been set since), as Ray itself does when it turns token mode on for
    a new local cluster."""
    os.environ["RAY_AUTH_MODE"] = "token"
    try:
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    except (ImportError, AttributeError):  # a Ray without these entry points reads the environment later
        pass


def connect(address: str, namespace: str = "vapipe", log_to_driver: bool = True) -> str:
    """Connect this process to the cluster at ``address`` (reused if already connected);
    returns the address Ray reports."""
    ray = require_ray()
    address = parse_address(address)
    if ray.is_initialized():  # type: ignore[attr-defined]
        return address
    if address != "auto":
        check_reachable(address)
    if address != "auto" and "RAY_AUTH_MODE" not in os.environ and token_available():
        use_token_mode()
    elif os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        use_token_mode()  # set after Ray was imported: Ray would not see it otherwise
    try:
        ctx = ray.init(address=address, namespace=namespace, log_to_driver=log_to_driver,  # type: ignore[attr-defined]
                       logging_level=logging.WARNING, configure_logging=False)
    except Exception as exc:  # noqa: BLE001 - Ray raises many kinds; one line for the user
        raise ClusterError(_reason(address, exc)) from None
    info = getattr(ctx, "address_info", None) or {}
    return str(info.get("gcs_address") or address)


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Something accepts TCP connections at the HOST:PORT of ``address`` (Ray itself waits minutes
    for an address where nothing answers); a one-line ClusterError otherwise."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ClusterError(f"cannot connect to the Ray cluster at {address}: nothing answers at {host}:{port} "
                           f"({reason})") from None


def _reason(address: str, exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if re.search(r"auth|token|unauthenticated", text, re.IGNORECASE):
        return (f"Ray cluster at {address} refused the connection ({text[:160]}): it uses token authentication; "
                "put its token in RAY_AUTH_TOKEN or ~/.ray/auth_token (`ray get-auth-token` on the head prints it) "
                "and set RAY_AUTH_MODE=token")
    if address == "auto":
        return f"no Ray cluster found on this machine ({text[:160]}); start one with `ray start --head` or give " \
               "--cluster ray://HOST:PORT"
    return f"cannot connect to the Ray cluster at {address}: {text[:200]}"
