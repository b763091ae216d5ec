"""The HCL writer's output is already `terraform fmt` clean, and parses back."""

from __future__ import annotations

import subprocess
from pathlib import Path

import hcl2

from cronwarden.deploy.hcl import Attr, Block, Comment, Expr, render, string

from .conftest import terraform_or_skip

SAMPLE = [
    Comment("a comment\nover two lines"),
    Block(
        "module",
        ("x",),
        [
            Attr("source", "./m"),
            Attr("a", 1),
            Attr("longer_name", True),
            Attr("obj", {"nightly-export": {"cron": "0 2 * * *", "k": 1.5}, "b": {}}),
            Attr("after", Expr("var.x")),
            Attr("short", []),
            Attr("items", ["a", "b"]),
            Attr("long", ["x" * 40, "y" * 40, "z" * 40]),
            Attr("objs", [{"a": 1}, {"bb": 2}]),
            Attr("tpl", "${not.interpolated} %{x}"),
            Block("empty"),
            Block("inner", body=[Attr("z", None)]),
        ],
    ),
]


def test_string_escapes_templates() -> None:
    assert string('a "b" ${c} %{d}') == '"a \\"b\\" $${c} %%{d}"'


def test_output_is_fmt_clean(tmp_path: Path) -> None:
    binary = terraform_or_skip()
    (tmp_path / "a.tf").write_text(render(SAMPLE))
    done = subprocess.run(
        [binary, "fmt", "-check", "-diff", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"CHECKPOINT_DISABLE": "1", "TF_CLI_CONFIG_FILE": "/dev/null"},
    )
    assert done.returncode == 0, done.stdout


def test_output_parses_back() -> None:
    parsed = hcl2.loads(render(SAMPLE))
    body = parsed["module"][0]['"x"']
    assert body["obj"]['"nightly-export"']["k"] == 1.5 or body["obj"]["nightly-export"]["k"] == 1.5
    assert body["tpl"] == '"$${not.interpolated} %%{x}"'
    assert body["long"] == ['"' + "x" * 40 + '"', '"' + "y" * 40 + '"', '"' + "z" * 40 + '"']
