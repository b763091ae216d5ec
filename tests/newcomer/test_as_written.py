"""The page runner itself: markers, a background step started, waited for and stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import as_written
from .conftest import python3_shim

PAGE = """# A page

Start the server and leave it running:

<!-- run-as-written: background until /Serving HTTP on 127\\.0\\.0\\.1 port [0-9]+/ (a server) -->
```bash
python3 -u -m http.server 0 --bind 127.0.0.1
```

<!-- run-as-written: skip (for the reader only) -->
```bash
exit 7
```

```bash
echo "after the server"
grep -Eo 'port [0-9]+' .run-as-written/background-0.log
```
"""


def test_markers_are_read() -> None:
    page = as_written.steps(PAGE)
    assert [step.mode for step in page] == ["background", "skip", "run"]
    assert page[0].ready == r"Serving HTTP on 127\.0\.0\.1 port [0-9]+"
    assert page[0].commands == ("python3 -u -m http.server 0 --bind 127.0.0.1",)


def test_an_unknown_marker_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown run-as-written marker 'skpi'"):
        as_written.steps("<!-- run-as-written: skpi -->\n```bash\ntrue\n```\n")


def test_section_stops_at_the_next_heading() -> None:
    text = "# T\n## A\n```bash\na\n```\n### A.1\n```bash\nb\n```\n## B\n```bash\nc\n```\n"
    page = as_written.steps(as_written.section(text, "## A"))
    assert [step.commands for step in page] == [("a",), ("b",)]


@pytest.mark.slow
def test_a_background_step_is_waited_for_and_stopped(tmp_path: Path) -> None:
    shims = python3_shim(tmp_path / "shims")
    env = {"PATH": f"{shims}:/usr/bin:/bin"}
    done = as_written.run(as_written.steps(PAGE), tmp_path, env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "after the server"
    assert done.stdout.splitlines()[1].startswith("port ")
    (pgid,) = as_written.started(tmp_path)
    assert not as_written.alive(pgid)


@pytest.mark.slow
def test_a_background_step_that_exits_fails_the_page(tmp_path: Path) -> None:
    page = "<!-- run-as-written: background until /never/ -->\n```bash\necho bye\n```\n"
    done = as_written.run(as_written.steps(page), tmp_path, {"PATH": "/usr/bin:/bin"}, 60)
    assert done.returncode == 1 and "step 0 exited" in done.stderr and "bye" in done.stderr
