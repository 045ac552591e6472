"""A Ctrl-C while the libraries load is held back until they are loaded (``cli.loading``): polars panics, and an
extension module is left half made, where it lands inside their loading."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from traceql.cli import loading


def test_a_ctrl_c_while_a_library_loads_is_raised_once_it_is_loaded(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A module whose loading is hit by a Ctrl-C half way loads whole, and the Ctrl-C comes after it, as the
    handler before it would have raised it; the handler is put back."""
    (tmp_path / "hit_while_loading.py").write_text(
        "import signal\nsignal.raise_signal(signal.SIGINT)\nWHOLE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(KeyboardInterrupt):
            loading.load(["hit_while_loading"])
        assert sys.modules["hit_while_loading"].WHOLE
        assert signal.getsignal(signal.SIGINT) is before
    finally:
        sys.modules.pop("hit_while_loading", None)


def test_libraries_not_installed_are_passed_over() -> None:
    """A library the environment lacks (``collect``'s, without the analysis ones) is left for the command to
    name if it needs it; the others load."""
    loading.load(["numpy", "no_such_library_here"])
    assert "numpy" in sys.modules and "no_such_library_here" not in sys.modules


def test_a_command_leaves_what_it_made_to_the_system(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a command made is frozen when it ends, so that the interpreter's last collections at exit do not walk
    it (a large run's objects: a tenth of a later command); a command that failed too."""
    import gc  # noqa: PLC0415

    from traceql.__main__ import main  # noqa: PLC0415

    for argv, code in ((["traceql", "--help"], 0), (["traceql", "--no-such-option"], 2)):
        monkeypatch.setattr(sys, "argv", argv)
        gc.unfreeze()
        try:
            with pytest.raises(SystemExit) as ended:
                main()
            assert ended.value.code == code
            assert gc.get_freeze_count() > 0
        finally:
            gc.unfreeze()


@pytest.mark.parametrize("own", [None, "narenas:3"])
def test_the_allocator_is_set_before_polars_loads_unless_the_user_set_it(own: str | None) -> None:
    """polars reads its allocator's settings (``_RJEM_MALLOC_CONF``) once, when it loads, after its own
    defaults: the command line's come after those, so they win, and a user's own setting is left as given."""
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"} | ({"_RJEM_MALLOC_CONF": own} if own
                                                                              else {})
    code = ("import os, sys\nsys.argv = ['traceql', '--help']\nfrom traceql.__main__ import allocator_settings, main\n"
            "assert 'polars' not in sys.modules\ntry:\n    main()\nexcept SystemExit:\n    pass\nimport polars\n"
            "print(os.environ['_RJEM_MALLOC_CONF'])\nprint(allocator_settings())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    told, ours = out.stdout.splitlines()[-2:]
    assert ours.startswith("narenas:") and "dirty_decay_ms:1000" in ours
    assert told.endswith(own or ours)  # after polars' own defaults: these win
    assert (ours in told) == (own is None)
