"""Issue 32: the reference peers skip without their toolchain, except on CI, and build
once.

No broker here; the build tests compile the peers when ``javac``/``go`` exist (once per
source hash, cached in ``~/.cache/coopconsumer/peers``).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from peers import _build
from peers._build import go_peer, java_peer


@pytest.mark.parametrize("build", [java_peer, go_peer], ids=["java", "go"])
def test_a_missing_toolchain_skips_but_fails_on_ci(
    build: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not on PATH"):
        build()  # type: ignore[operator]
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the reference peers"):
        build()  # type: ignore[operator]


def test_the_java_peer_builds_and_runs() -> None:
    if shutil.which("javac") is None:
        _build.missing_tool("javac is not on PATH")
    peer = java_peer()
    assert java_peer() == peer  # cached: the same build
    done = subprocess.run(peer.argv("nonsense"), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "first argument: member or referee" in done.stderr


def test_the_go_peer_builds_and_runs() -> None:
    if shutil.which("go") is None:
        _build.missing_tool("go is not on PATH")
    peer = go_peer()
    assert go_peer() == peer
    done = subprocess.run(
        peer.argv("--balancer", "nonsense"), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "unknown balancer nonsense" in done.stdout
