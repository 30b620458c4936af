"""The model card of the bootstrapped base model ``v0`` (written beside its weights)."""

from __future__ import annotations

from typing import Any


def base_model_card(info: dict[str, Any]) -> dict[str, Any]:
    """The model card of v0 from its lineage record (``lineage.json``)."""
    return {
        "model": "flywheel embedded base model",
        "version": info["version"],
        "what": (
            "character-level GPT-2 built from a config and pre-trained here by SFT on the "
            "demo calculator domain (2-digit additions); a deliberately weak start for the loop"
            if info["source"] == "trained"
            else "a local Hugging Face causal LM registered as the base model"
        ),
        "architecture": info["config"] if info["source"] == "trained" else "see config.json",
        "parameters": info["n_params"],
        "training": {
            "method": info["method"],
            "data": info["training_data"] if info["source"] == "trained" else None,
            "seed": info["seed"],
            "steps": info["steps"],
            "stopped_at_dev_accuracy": info["dev_curve"][-1][1] if info["dev_curve"] else None,
            "final_loss": info["final_loss"],
        },
        "evaluation": {
            "golden_accuracy": round(info["golden_accuracy"], 4),
            "golden_items": info["golden_items"],
            "decoding": "greedy",
            "golden_manifest": info["golden_manifest"],
        },
        "input_hash": info["input_hash"],
        "lineage": {"base": None, "user_data": "none (synthetic only)"},
        "intended_use": "demo and tests of the flywheel loop; not a general-purpose model",
        "hardware": info["hardware"],
        "wall_s": info["wall_s"],
        "created_at": info["created_at"],
    }
