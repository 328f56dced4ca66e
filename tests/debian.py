"""Debian packages that tests need (mosquitto, prometheus, chromium): installed on first use.

``need(binary, package)`` returns the binary's path, installing the package with
apt-get when the binary is missing (as root only; ``apt-get update`` runs at most
once per test session), or skips the test naming the package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

import pytest

_LOCK = threading.Lock()
_UPDATED = False
_FAILED: dict[str, str] = {}


def _run(cmd: list[str], timeout: float) -> str:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except (subprocess.TimeoutExpired, OSError) as exc:
        return f"{' '.join(cmd[:2])} failed: {exc}"
    if r.returncode != 0:
        return f"{' '.join(cmd[:2])} failed: " + (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
    return ""


def install(package: str) -> str:
    """Install ``package``; '' on success, else the reason."""
    global _UPDATED
    with _LOCK:
        if package in _FAILED:
            return _FAILED[package]
        if os.geteuid() != 0:
            reason = f"not root, cannot apt-get install {package}"
        elif not shutil.which("apt-get"):
            reason = f"no apt-get to install {package}"
        else:
            reason = _run(["apt-get", "install", "-y", "--no-install-recommends", package], 900)
            if reason and not _UPDATED:
                _UPDATED = True
                reason = _run(["apt-get", "update"], 300) or \
                    _run(["apt-get", "install", "-y", "--no-install-recommends", package], 900)
        if reason:
            _FAILED[package] = reason
        return reason


def need(binary: str, package: str) -> str:
    """Path of ``binary`` (installing Debian ``package`` if needed), or skip naming the package."""
    path = shutil.which(binary)
    if path is None:
        reason = install(package)
        path = shutil.which(binary)
        if path is None:
            pytest.skip(f"needs {binary} (Debian package {package}): {reason or 'not found after install'}")
    return path
