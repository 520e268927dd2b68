"""Guard policies: YAML data in ``skills/guard/`` merged into one dict per (language, definition).

Order of merging: ``common.yaml`` < ``<language>.yaml`` < ``overrides/<definition>.yaml``. An override
file may hold top-level keys (applied to every language) and/or per-language sections ``python:``,
``triton:``, ``cuda:`` (applied after the top-level keys). Mappings merge key by key and a key set to
``null`` is removed (that is how an override lifts a refusal); lists are unioned; scalars replaced.

Every rule id a policy names must be in ``rules.yaml``, so a typo cannot silently disable a check.
"""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ..paths import skill_dirs, shipped

# The shipped policies. Without an explicit policy folder each file is looked up in the repository's
# skills/guard/ first, then here (harness/paths.py): a repository replaces a policy file by adding its own.
DEFAULT_POLICY_DIR = shipped() / "skills" / "guard"
LANGUAGES = ("python", "triton", "cuda")


class PolicyError(ValueError):
    """A policy file that is missing, malformed, or names an unknown rule."""


def merge(base: Any, over: Any) -> Any:
    """Merge ``over`` onto ``base`` (see the module docstring); returns a new object."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = copy.deepcopy(base)
        for k, v in over.items():
            if v is None:
                out.pop(k, None)
            elif k in out:
                out[k] = merge(out[k], v)
            else:
                out[k] = copy.deepcopy(v)
        return out
    if isinstance(base, list) and isinstance(over, list):
        out = list(base)
        for item in over:
            if item not in out:
                out.append(copy.deepcopy(item))
        return out
    return copy.deepcopy(over)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise PolicyError(f"{path}: no such policy file") from None
    except yaml.YAMLError as e:
        raise PolicyError(f"{path}: not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PolicyError(f"{path}: a policy must be a mapping at the top level")
    return data


def _dirs(policy_dir: Path | str | None) -> tuple[Path, ...]:
    """Where policy files are looked up: ``policy_dir`` alone, or the repository's skills/guard then ours."""
    if policy_dir is not None:
        return (Path(policy_dir),)
    return tuple(skill_dirs("guard")) or (DEFAULT_POLICY_DIR,)


def _find(dirs: tuple[Path, ...], name: str, required: bool = True) -> Path | None:
    for d in dirs:
        if (d / name).is_file():
            return d / name
    if required:
        raise PolicyError(f"{name}: no such policy file (looked in {', '.join(str(d) for d in dirs)})")
    return None


def load_rules(policy_dir: Path | str | None = None) -> dict[str, str]:
    """Rule id -> why-it-matters sentence, static and runtime rules together."""
    return _load_rules_cached(_dirs(policy_dir))


@lru_cache(maxsize=16)
def _load_rules_cached(dirs: tuple[Path, ...]) -> dict[str, str]:
    data = _read_yaml(_find(dirs, "rules.yaml"))
    rules: dict[str, str] = {}
    for section in ("static", "runtime"):
        for rid, why in (data.get(section) or {}).items():
            if not isinstance(why, str) or not why.strip():
                raise PolicyError(f"rules.yaml: rule '{rid}' needs a one-sentence why")
            rules[str(rid)] = why.strip()
    return rules


def why(rule: str, policy_dir: Path | None = None) -> str:
    return load_rules(policy_dir).get(rule, "")


def _rule_refs(policy: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, rule id) for every rule a merged policy names."""
    refs = []
    for mod, rule in (policy.get("imports", {}).get("denied") or {}).items():
        refs.append((f"imports.denied.{mod}", rule))
    for key in ("names", "attributes"):
        for name, rule in (policy.get(key) or {}).items():
            refs.append((f"{key}.{name}", rule))
    for mod, spec in (policy.get("module_members") or {}).items():
        if not isinstance(spec, dict) or not isinstance(spec.get("allowed", []), list):
            raise PolicyError(f"module_members.{mod}: needs a mapping with an 'allowed' list")
        refs.append((f"module_members.{mod}", spec.get("rule", "introspection")))
    for i, entry in enumerate(policy.get("native") or []):
        if not isinstance(entry, dict) or "pattern" not in entry or "rule" not in entry:
            raise PolicyError(f"native[{i}]: each entry needs 'pattern' and 'rule'")
        try:
            re.compile(entry["pattern"])
        except re.error as e:
            raise PolicyError(f"native[{i}]: bad pattern {entry['pattern']!r}: {e}") from None
        refs.append((f"native[{i}]", entry["rule"]))
    return refs


def load_policy(language: str, definition: str | None = None, policy_dir: Path | None = None) -> dict[str, Any]:
    """The merged policy for one language (and definition, when it has an override file)."""
    language = str(getattr(language, "value", language)).lower()
    if language not in LANGUAGES:
        raise PolicyError(f"no guard policy for language '{language}' (known: {', '.join(LANGUAGES)})")
    return _load_policy_cached(language, definition, _dirs(policy_dir))


@lru_cache(maxsize=64)
def _load_policy_cached(language: str, definition: str | None, dirs: tuple[Path, ...]) -> dict[str, Any]:
    policy = merge(_read_yaml(_find(dirs, "common.yaml")), _read_yaml(_find(dirs, f"{language}.yaml")))
    if definition:
        opath = _find(dirs, f"overrides/{definition}.yaml", required=False)
        if opath is not None:
            over = _read_yaml(opath)
            sections = {k: over.pop(k) for k in LANGUAGES if k in over}
            policy = merge(policy, over)
            if sections.get(language):
                policy = merge(policy, sections[language])
    rules = _load_rules_cached(dirs)
    for where, rule in _rule_refs(policy):
        if rule not in rules:
            raise PolicyError(f"policy {language}/{definition or '-'}: {where} names unknown rule '{rule}'")
    policy["language"] = language
    return policy


def clear_caches() -> None:
    """Forget loaded files (tests that write policies to a temporary folder call this)."""
    _load_rules_cached.cache_clear()
    _load_policy_cached.cache_clear()
