"""``cronwarden deploy check DIR``: offline validation of a rendered deployment (or of any folder
of Terraform using the google / azurerm providers and local modules).

Checks, each returning findings (one line each; no findings = pass):

* **parse** (python-hcl2): every ``.tf`` file parses;
* **fmt** (``terraform fmt -check``): everything is in canonical format;
* **validate** (``terraform validate``): every module that needs no provider download (the
  provider-free ``common/settings``) - the others cannot be initialised offline;
* **schema**: every resource / data source type exists in the pinned provider schemas, every
  argument and nested block is known there (an unknown one fails, with a close-match hint),
  arguments are not written as blocks nor blocks as arguments, required arguments are set;
* **modules**: every call of a local module passes only variables the module declares and all
  its required ones, and every ``module.NAME.OUTPUT`` reference names a declared output;
* **references**: every ``var.``, ``local.``, ``data.`` and resource reference names something
  the module declares;
* **secrets**: nothing that looks like a key, SAS token or connection string with a secret;
* **checkov** (optional, ``--checkov``): its built-in checks plus cronwarden's dead-letter
  policies (``deployments/checkov``), offline; a parse error counts as a failure (checkov itself
  exits 0 on those, so its summary is read).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cronwarden.model.errors import CronwardenError

from .schema import BlockSchema, Schemas

RESOURCE_META = {
    "count",
    "for_each",
    "depends_on",
    "provider",
    "lifecycle",
    "provisioner",
    "connection",
}
MODULE_META = {"source", "version", "count", "for_each", "depends_on", "providers"}
_SKIP_PARTS = {".terraform"}
_SECRET = re.compile(
    r"(AccountKey=|SharedAccessKey=|SharedAccessSignature=|sig=[A-Za-z0-9%]{20,}|"
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----|\"private_key\"\s*:|AIza[0-9A-Za-z_-]{35}|"
    # a password in a URL (an index URL in a requirements file), webhook URLs whose path is
    # the credential, and well-known token prefixes
    r"://[^/\s:@]+:(?P<password>[^/\s@]{3,})@|hooks\.slack\.com/services/|discord(?:app)?\.com/api/webhooks/|"
    r"\.webhook\.office\.com/|xox[abpr]-[0-9A-Za-z-]{10,}|gh[pousr]_[0-9A-Za-z]{20,}|"
    r"sk_live_[0-9A-Za-z]{10,}|AKIA[0-9A-Z]{16})"
)
_MODULE_REF = re.compile(r"\bmodule\.([A-Za-z_][\w-]*)(?:\[[^\]]*\])?\.([A-Za-z_]\w*)")


class ToolMissing(CronwardenError):
    """An external tool a check needs (terraform, checkov) is not installed."""


@dataclass
class Report:
    """Findings per check name; ``skipped`` holds checks that could not run, with the reason."""

    findings: dict[str, list[str]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    #: per check, what it covered and what it could not (said after its ok / problems line)
    scope: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.findings.values())

    def lines(self) -> list[str]:
        out = []
        for name, items in self.findings.items():
            verdict = "ok" if not items else f"{len(items)} problem(s)"
            scope = f" ({self.scope[name]})" if name in self.scope else ""
            out.append(f"{name}: {verdict}{scope}")
            out.extend(f"  {item}" for item in items)
        out.extend(f"{name}: skipped ({why})" for name, why in self.skipped.items())
        return out


# --- files ---------------------------------------------------------------------------------------


def tf_files(folder: Path) -> list[Path]:
    """``.tf`` files under ``folder`` (Terraform's own ``.terraform`` caches excluded)."""
    return sorted(
        p for p in folder.rglob("*.tf") if not _SKIP_PARTS.intersection(p.relative_to(folder).parts)
    )


def module_dirs(folder: Path) -> list[Path]:
    return sorted({p.parent for p in tf_files(folder)})


def parse(folder: Path) -> tuple[dict[Path, dict[str, Any]], list[str]]:
    """Every ``.tf`` file parsed with python-hcl2; the findings are parse errors."""
    try:
        import hcl2
    except ImportError:
        raise CronwardenError(
            "the deploy checks need python-hcl2: pip install 'cronwarden[deploy]'"
        ) from None

    parsed: dict[Path, dict[str, Any]] = {}
    errors: list[str] = []
    for path in tf_files(folder):
        try:
            parsed[path] = hcl2.loads(path.read_text(encoding="utf-8"))
        except Exception as exc:  # lark raises many types; each is a parse failure
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            errors.append(f"{path.relative_to(folder)}: does not parse: {first}")
    return parsed, errors


def _unquote(label: str) -> str:
    return label[1:-1] if len(label) >= 2 and label[0] == label[-1] == '"' else label


def _is_block_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and all(isinstance(v, dict) and v.get("__is_block__") for v in value)
        and bool(value)
    )


def _labelled(doc: dict[str, Any], kind: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``resource``/``data`` blocks of a parsed file: (type, name, body)."""
    for entry in doc.get(kind, []):
        for tf_type, named in entry.items():
            for name, body in named.items():
                yield _unquote(tf_type), _unquote(name), body


# --- schema --------------------------------------------------------------------------------------


def _hint(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_body(
    body: dict[str, Any], schema: BlockSchema, where: str, *, top: bool = False
) -> list[str]:
    """Findings for one resource/block body against its schema (recursive)."""
    out: list[str] = []
    known = sorted([*schema.attributes, *schema.blocks])
    for key, value in body.items():
        if key.startswith("__"):
            continue
        if top and key in RESOURCE_META:
            continue
        if key == "dynamic":
            for entry in value:
                for label, dyn in entry.items():
                    name = _unquote(label)
                    if name not in schema.blocks:
                        out.append(f"{where}: unknown dynamic block {name!r}{_hint(name, known)}")
                        continue
                    for content in dyn.get("content", []):
                        out += check_body(content, schema.blocks[name], f"{where}.{name}")
            continue
        if key in schema.attributes:
            if _is_block_list(value):
                out.append(f"{where}: {key!r} is an argument: write `{key} = ...`, not a block")
            continue
        if key in schema.blocks:
            if not _is_block_list(value):
                out.append(f"{where}: {key!r} is a block: write `{key} {{ ... }}`")
                continue
            for item in value:
                out += check_body(item, schema.blocks[key], f"{where}.{key}")
            continue
        out.append(f"{where}: unknown argument {key!r}{_hint(key, known)}")
    present = set(body)
    for name in schema.required():
        if name not in present and name != "id":
            out.append(f"{where}: required argument {name!r} is missing")
    return out


#: Providers whose schemas are not pinned here: their modules are checked by ``terraform
#: validate`` / ``apply`` with the real provider instead (AWS: the offline provider mirror and
#: the apply against moto in tests/aws).
UNPINNED_PROVIDERS = ("aws_",)


def check_schema(parsed: dict[Path, dict[str, Any]], folder: Path, schemas: Schemas) -> list[str]:
    """Every resource and data source against the pinned provider schemas (types of
    :data:`UNPINNED_PROVIDERS` are left to ``terraform validate`` with the real provider)."""
    out: list[str] = []
    for path, doc in parsed.items():
        rel = path.relative_to(folder)
        for kind in ("resource", "data"):
            for tf_type, name, body in _labelled(doc, kind):
                if tf_type.startswith(UNPINNED_PROVIDERS):
                    continue
                where = f"{rel}: {kind} {tf_type}.{name}"
                schema = schemas.get(kind, tf_type)
                if schema is None:
                    out.append(
                        f"{where}: unknown {kind} type {tf_type!r} (not in the pinned schemas)"
                    )
                    continue
                out += check_body(body, schema, where, top=True)
    return out


# --- modules -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ModuleInterface:
    variables: dict[str, bool]  #: name => required (no default)
    outputs: frozenset[str]


def _interface(folder: Path, parsed: dict[Path, dict[str, Any]]) -> _ModuleInterface:
    variables: dict[str, bool] = {}
    outputs: set[str] = set()
    for path, doc in parsed.items():
        if path.parent != folder:
            continue
        for entry in doc.get("variable", []):
            for name, body in entry.items():
                variables[_unquote(name)] = "default" not in body
        for entry in doc.get("output", []):
            outputs.update(_unquote(name) for name in entry)
    return _ModuleInterface(variables, frozenset(outputs))


def check_modules(parsed: dict[Path, dict[str, Any]], folder: Path) -> list[str]:
    """Local module calls against the called modules' variables and outputs."""
    out: list[str] = []
    for module_dir in module_dirs(folder):
        calls: dict[str, Path] = {}
        texts: list[tuple[Path, str]] = []
        for path, doc in parsed.items():
            if path.parent != module_dir:
                continue
            texts.append((path, path.read_text(encoding="utf-8")))
            for entry in doc.get("module", []):
                for label, body in entry.items():
                    name = _unquote(label)
                    source = _unquote(str(body.get("source", "")))
                    where = f"{path.relative_to(folder)}: module {name}"
                    if not source.startswith("."):
                        continue  # registry modules cannot be checked offline
                    target = (module_dir / source).resolve()
                    if not target.is_dir():
                        out.append(f"{where}: source {source!r} does not exist")
                        continue
                    calls[name] = target
                    iface = _interface(target, parsed)
                    for key in body:
                        if key.startswith("__") or key in MODULE_META:
                            continue
                        if key not in iface.variables:
                            out.append(
                                f"{where}: unknown variable {key!r}"
                                f"{_hint(key, sorted(iface.variables))}"
                            )
                    for var, required in iface.variables.items():
                        if required and var not in body:
                            out.append(f"{where}: required variable {var!r} is missing")
        for path, text in texts:
            for ref in _MODULE_REF.finditer(text):
                name, output = ref.group(1), ref.group(2)
                if name in calls:
                    iface = _interface(calls[name], parsed)
                    if output not in iface.outputs:
                        out.append(
                            f"{path.relative_to(folder)}: module.{name}.{output}: module "
                            f"{name!r} has no output {output!r}"
                            + _hint(output, sorted(iface.outputs))
                        )
    return sorted(set(out))


_VAR_REF = re.compile(r"\bvar\.([A-Za-z_][\w-]*)")
_LOCAL_REF = re.compile(r"\blocal\.([A-Za-z_][\w-]*)")
_DATA_REF = re.compile(r"\bdata\.([a-z][a-z0-9]*_\w+)\.([A-Za-z_][\w-]*)")
_RESOURCE_REF = re.compile(r"(?<![.\w\"/])((?:google|azurerm)_\w+)\.([A-Za-z_][\w-]*)")
_COMMENT = re.compile(r"^\s*#.*$", re.MULTILINE)


def _declared(module_dir: Path, parsed: dict[Path, dict[str, Any]]) -> dict[str, set[str]]:
    names: dict[str, set[str]] = {"var": set(), "local": set(), "resource": set(), "data": set()}
    for path, doc in parsed.items():
        if path.parent != module_dir:
            continue
        for entry in doc.get("variable", []):
            names["var"].update(_unquote(name) for name in entry)
        for block in doc.get("locals", []):
            names["local"].update(k for k in block if not k.startswith("__"))
        for tf_type, name, _ in _labelled(doc, "resource"):
            names["resource"].add(f"{tf_type}.{name}")
        for tf_type, name, _ in _labelled(doc, "data"):
            names["data"].add(f"{tf_type}.{name}")
    return names


def check_references(parsed: dict[Path, dict[str, Any]], folder: Path) -> list[str]:
    """``var.X``, ``local.X``, ``data.T.N`` and ``T.N`` references name something declared in
    the same module (what ``terraform validate`` would report, without providers)."""
    out: list[str] = []
    for module_dir in module_dirs(folder):
        names = _declared(module_dir, parsed)
        for path in sorted(p for p in parsed if p.parent == module_dir):
            text = _COMMENT.sub("", path.read_text(encoding="utf-8"))
            rel = path.relative_to(folder)
            for match in _VAR_REF.finditer(text):
                if match.group(1) not in names["var"]:
                    out.append(f"{rel}: var.{match.group(1)} is not declared")
            for match in _LOCAL_REF.finditer(text):
                if match.group(1) not in names["local"]:
                    out.append(f"{rel}: local.{match.group(1)} is not declared")
            for match in _DATA_REF.finditer(text):
                ref = f"{match.group(1)}.{match.group(2)}"
                if ref not in names["data"]:
                    out.append(f"{rel}: data.{ref} is not declared")
            for match in _RESOURCE_REF.finditer(text):
                ref = f"{match.group(1)}.{match.group(2)}"
                before = text[max(0, match.start() - 5) : match.start()]
                if before.endswith("data.") or ref in names["resource"]:
                    continue
                out.append(f"{rel}: {ref} is not declared")
    return sorted(set(out))


def _shown(match: re.Match[str]) -> str:
    """Enough of a secret-looking match to find it, never the secret: a URL's password is
    masked, anything else cut to its first characters."""
    found = match.group(0)
    if match.group("password") is not None:
        return found.replace(match.group("password"), "***")
    if "=" in found:  # AccountKey=, sig=...: the name only
        return found[: found.index("=") + 1]
    if found.startswith("-----BEGIN") or found.startswith('"private_key"'):
        return found  # a header, no key material
    return found[:6]  # a token's prefix (xoxb-, ghp_...), a webhook host


def _placeholder(password: str | None) -> bool:
    """Whether a URL's password is a placeholder (``PASSWORD``, ``${VAR}``, ``<pw>``, ``***``):
    capitals alone; a real one has digits or lower case."""
    if password is None:
        return False
    return bool(re.fullmatch(r"[A-Z_]+", password)) or password.startswith(("${", "<", "*"))


#: files that hold a local environment's secrets: never part of a rendered package
_ENV_FILES = re.compile(r"(\.env(\..*)?|.*\.env|\.envrc|\.netrc|\.pypirc)")


def check_secrets(folder: Path) -> list[str]:
    """Anything that looks like a secret in a rendered file (text files only), and any local
    environment file (``.env``, ``.netrc``...) that a package holds."""
    out = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if _SKIP_PARTS.intersection(path.relative_to(folder).parts) or path.suffix == ".zip":
            continue
        if _ENV_FILES.fullmatch(path.name):
            out.append(f"{path.relative_to(folder)}: an environment file (secrets): remove it")
            continue
        if path.name.startswith("terraform.tfstate") or path.suffix == ".whl":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for match in _SECRET.finditer(text):
            if _placeholder(match.group("password")):
                continue  # a documented shape (postgresql://user:PASSWORD@HOST), no secret
            shown = _shown(match)
            out.append(f"{path.relative_to(folder)}: looks like a secret: {shown}...")
    return out


# --- terraform -----------------------------------------------------------------------------------


def terraform_binary() -> str:
    found = shutil.which("terraform")
    if found is None:
        raise ToolMissing("terraform is not on PATH")
    return found


def _tf_env() -> dict[str, str]:
    env = dict(os.environ)
    env["CHECKPOINT_DISABLE"] = "1"
    env["TF_IN_AUTOMATION"] = "1"
    env.setdefault("TF_CLI_CONFIG_FILE", os.devnull)
    if not os.path.exists(env["TF_CLI_CONFIG_FILE"]):
        env["TF_CLI_CONFIG_FILE"] = os.devnull
    return env


def _run(argv: list[str], cwd: Path, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env=_tf_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def check_fmt(folder: Path) -> list[str]:
    """``terraform fmt -check -recursive``: the files that are not canonically formatted."""
    done = _run([terraform_binary(), "fmt", "-check", "-recursive", "-list=true", "."], folder)
    if done.returncode == 0:
        return []
    listed = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if not listed:
        return [f"terraform fmt failed: {done.stderr.strip().splitlines()[-1:]}"]
    return [f"{name}: not in `terraform fmt` format" for name in listed]


def provider_free(parsed: dict[Path, dict[str, Any]], module_dir: Path) -> bool:
    """True if the module declares no resources, data sources, providers or module calls."""
    for path, doc in parsed.items():
        if path.parent != module_dir:
            continue
        if any(doc.get(kind) for kind in ("resource", "data", "provider", "module")):
            return False
        for block in doc.get("terraform", []):
            if block.get("required_providers"):
                return False
    return True


def _validate_scope(parsed: dict[Path, dict[str, Any]], folder: Path) -> str:
    """What ``terraform validate`` covered, and what it could not (modules needing a provider
    download, which the schema, modules and references checks cover instead)."""
    dirs = module_dirs(folder)
    done = [d for d in dirs if provider_free(parsed, d)]
    rest = [d for d in dirs if not provider_free(parsed, d)]

    def names(found: list[Path]) -> str:
        return ", ".join(str(d.relative_to(folder)) for d in found) or "none"

    text = f"terraform validate ran on {len(done)} provider-free module(s): {names(done)}"
    if rest:
        text += (
            f"; NOT validated by terraform: {len(rest)} module(s) needing a provider download "
            f"({names(rest)}), checked by the schema, modules and references checks instead"
        )
    return text


def check_validate(parsed: dict[Path, dict[str, Any]], folder: Path) -> tuple[list[str], int]:
    """``terraform validate`` of every provider-free module (in a scratch copy, so no
    ``.terraform`` folder is left behind). Returns findings and how many modules were validated."""
    out: list[str] = []
    count = 0
    binary = terraform_binary()
    for module_dir in module_dirs(folder):
        if not provider_free(parsed, module_dir):
            continue
        count += 1
        rel = module_dir.relative_to(folder)
        with tempfile.TemporaryDirectory(prefix="cw-validate-") as scratch:
            work = Path(scratch) / "m"
            shutil.copytree(module_dir, work, ignore=shutil.ignore_patterns(".terraform*"))
            init = _run([binary, "init", "-backend=false", "-input=false", "-no-color"], work)
            if init.returncode != 0:
                out.append(f"{rel}: terraform init failed: {init.stderr.strip()[:300]}")
                continue
            done = _run([binary, "validate", "-json", "-no-color"], work)
            try:
                result = json.loads(done.stdout)
            except json.JSONDecodeError:
                out.append(f"{rel}: terraform validate failed: {done.stderr.strip()[:300]}")
                continue
            for diag in result.get("diagnostics", []):
                if diag.get("severity") == "error":
                    out.append(f"{rel}: {diag.get('summary')}: {diag.get('detail', '')}".strip())
    return out, count


# --- checkov -------------------------------------------------------------------------------------


def checkov_binary() -> str:
    explicit = os.environ.get("CRONWARDEN_CHECKOV")
    found = explicit or shutil.which("checkov")
    if not found:
        raise ToolMissing(
            "checkov is not installed (pip install checkov; or set CRONWARDEN_CHECKOV)"
        )
    return found


def check_checkov(folder: Path, policies: Path) -> list[str]:
    """checkov (offline) with cronwarden's policies; failures and parse errors are findings."""
    argv = [
        checkov_binary(),
        "--directory",
        str(folder),
        "--framework",
        "terraform",
        "--skip-download",
        "--external-checks-dir",
        str(policies),
        "--output",
        "json",
        "--quiet",
        "--compact",
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=600, check=False, stdin=subprocess.DEVNULL
    )
    try:
        data = json.loads(done.stdout or "{}")
    except json.JSONDecodeError:
        return [f"checkov produced no JSON (exit {done.returncode}): {done.stderr.strip()[-300:]}"]
    reports = data if isinstance(data, list) else [data]
    out: list[str] = []
    scanned = 0
    for report in reports:
        summary = report.get("summary", {})
        scanned += int(summary.get("resource_count", 0))
        if summary.get("parsing_errors"):
            out.append(f"checkov could not parse {summary['parsing_errors']} file(s)")
        for failed in report.get("results", {}).get("failed_checks", []):
            out.append(
                f"{failed.get('file_path', '?').lstrip('/')}: {failed.get('check_id')} "
                f"{failed.get('check_name')} ({failed.get('resource')})"
            )
    if scanned == 0 and not out:
        out.append("checkov scanned no resources (nothing parsed?)")
    return out


# --- all -----------------------------------------------------------------------------------------


def run_checks(
    folder: Path | str,
    *,
    schemas: Schemas | bool | None = True,
    fmt: bool = True,
    validate: bool = True,
    checkov: bool = False,
) -> Report:
    """Every offline check of ``folder``. ``schemas=True`` installs the pinned schemas (npm) on
    first use; pass a :class:`Schemas` to reuse one, or ``False`` to skip the schema check."""
    from . import files

    root = Path(folder).resolve()
    if not root.is_dir():
        raise CronwardenError(f"{folder} is not a directory")
    report = Report()
    parsed, errors = parse(root)
    report.findings["parse"] = errors
    if not parsed and not errors:
        report.findings["parse"] = [f"no .tf files under {folder}"]
        return report

    def tool(name: str, fn: Callable[[], list[str]]) -> None:
        try:
            report.findings[name] = fn()
        except ToolMissing as exc:
            report.skipped[name] = str(exc)

    if fmt:
        tool("fmt", lambda: check_fmt(root))
    if validate:
        counted: list[int] = []

        def _validate() -> list[str]:
            found, count = check_validate(parsed, root)
            counted.append(count)
            report.scope["validate"] = _validate_scope(parsed, root)
            return found

        tool("validate", _validate)
    if schemas is not False:
        table = schemas if isinstance(schemas, Schemas) else Schemas.installed()
        report.findings["schema"] = check_schema(parsed, root, table)
    report.findings["modules"] = check_modules(parsed, root)
    report.findings["references"] = check_references(parsed, root)
    report.findings["secrets"] = check_secrets(root)
    if checkov:
        tool("checkov", lambda: check_checkov(root, files.checkov_policies()))
    return report


__all__ = [
    "Report",
    "ToolMissing",
    "check_body",
    "check_checkov",
    "check_fmt",
    "check_modules",
    "check_references",
    "check_schema",
    "check_secrets",
    "check_validate",
    "parse",
    "run_checks",
]
