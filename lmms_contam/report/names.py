"""Short, unique display names for the models of a report.

A model's identity is what its run recorded: lmms-eval's `model_name`, or its model type and arguments
(`llava_hf (pretrained=/data/ckpt/run7/final,device=cuda)`), VLMEvalKit's `NAME (VLMEvalKit)`. Tables
and plot axes show the weights' name instead, with as many trailing path parts as tell the models apart;
the full identity stays in the details and the JSON.
"""

from __future__ import annotations

import re

WEIGHTS_KEYS = ("pretrained", "model", "model_name", "model_path", "checkpoint")


def _parts(identity: str) -> tuple[str, list[str]]:
    """(the model type or name, the path parts of its weights, last first)."""
    head, _, args = identity.partition(" (")
    fields = dict(re.findall(r"(\w+)=([^,]*)", args.removesuffix(")")))
    weights = next((fields[key] for key in WEIGHTS_KEYS if fields.get(key)), "")
    if not weights and "/" in head:  # a run named by its weights' path alone
        weights = head
    return head.strip(), [part for part in reversed(weights.strip("/").split("/")) if part]


def display_names(identities: list[str]) -> dict[str, str]:
    """Each identity's display name: the last path parts of its weights that make it unique (the model
    type when there are no weights); the identity itself where nothing shorter tells it apart."""
    parsed = {identity: _parts(identity) for identity in identities}
    names = {}
    depth = 1
    while len(names) < len(parsed):
        tried = {
            identity: "/".join(reversed(parts[:depth])) if parts else head
            for identity, (head, parts) in parsed.items()
            if identity not in names
        }
        taken = list(names.values()) + list(tried.values())
        for identity, name in tried.items():
            if taken.count(name) == 1 and name:
                names[identity] = name
            elif depth >= len(parsed[identity][1]):
                names[identity] = identity
        depth += 1
    return names
