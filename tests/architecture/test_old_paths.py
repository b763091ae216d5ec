"""Every module path of the core from before the layers keeps working: each public name of each
old module resolves, through the old path, to the very object at its new home."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import cronwarden
from cronwarden._aliases import MOVED

#: every public name each old module defined (read from the modules before the move)
OLD_NAMES: dict[str, list[str]] = json.loads(
    (Path(__file__).with_name("old_names.json")).read_text(encoding="utf-8")
)
#: the three old modules that are layer packages now, and where their names live
PACKAGES = {
    "cronwarden.model": "cronwarden.model.runs",
    "cronwarden.jobs": "cronwarden.jobs.definitions",
    "cronwarden.cli": "cronwarden.cli.root",
}


def _new_home(old: str) -> str:
    return PACKAGES.get(old) or MOVED[old]


def test_the_list_covers_every_alias() -> None:
    assert set(OLD_NAMES) == set(MOVED) | set(PACKAGES)


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_each_old_name_is_the_same_object(old: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(old)
    new = importlib.import_module(_new_home(old))
    for name in OLD_NAMES[old]:
        assert getattr(module, name) is getattr(new, name), f"{old}.{name}"


def test_an_old_path_is_the_new_module_itself_and_says_where_it_went() -> None:
    code = (
        "import warnings, sys\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    import cronwarden.engine as old\n"
        "    from cronwarden.alerting.channels import Channel\n"
        "import cronwarden.run.engine as new\n"
        "import cronwarden.watch.alerting.channels as channels\n"
        "assert old is new and Channel is channels.Channel\n"
        "assert sys.modules['cronwarden.alerting.channels'] is channels\n"
        "assert new.__spec__.name == 'cronwarden.run.engine', new.__spec__.name\n"
        "texts = [str(w.message) for w in seen if w.category is DeprecationWarning]\n"
        "assert any('cronwarden.engine is now cronwarden.run.engine' in t for t in texts), texts\n"
        "assert all(w.filename == '<string>' for w in seen), [w.filename for w in seen]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_patching_through_an_old_path_patches_the_real_module() -> None:
    from unittest import mock

    import cronwarden.run.engine as engine

    original = engine.utcnow
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with mock.patch("cronwarden.engine.utcnow") as patched:
            assert engine.utcnow is patched
    assert engine.utcnow is original


def test_a_path_that_never_existed_still_fails() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("cronwarden.no_such_module")
    with pytest.raises(AttributeError):
        cronwarden.model.no_such_name  # noqa: B018


def test_the_public_api_resolves_where_it_did() -> None:
    for name in cronwarden.__all__:
        assert getattr(cronwarden, name) is not None, name
    assert cronwarden.Outcome is importlib.import_module("cronwarden.run.engine").Outcome
    assert cronwarden.Alert is importlib.import_module("cronwarden.watch.watcher").Alert
