"""Reading a policy file of the repository (``skills/bot-policy.yaml``, ``skills/promotion.yaml``) into
a strict model: YAML that does not parse, a top level that is not a mapping, an unknown key or a value
out of range is a PolicyError whose message says where. Callers fail closed on it."""

from __future__ import annotations

from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class PolicyError(ValueError):
    """The policy file is missing a required piece or says something invalid; the message says where."""


def parse_policy(model: type[M], text: str, where: str) -> M:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise PolicyError(f"{where}: not valid YAML: {e}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PolicyError(f"{where}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        lines = [f"{where}: invalid policy"]
        for err in e.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(top)"
            lines.append(f"  {loc}: {err['msg']}")
        raise PolicyError("\n".join(lines)) from None
