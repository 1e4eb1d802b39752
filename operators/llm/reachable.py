"""Whether a model can be reached from here, found without sending it a prompt."""

from __future__ import annotations

import os

from operators.llm.aliases import ModelAlias

OLLAMA_DEFAULT = "http://localhost:11434"


def ollama_base(alias: ModelAlias) -> str:
    return (alias.api_base or os.environ.get("OLLAMA_API_BASE") or OLLAMA_DEFAULT).rstrip("/")


def reachability(alias: ModelAlias, *, timeout: float = 1.0) -> tuple[bool, str]:
    """``(reachable, why)``: the embedded model's weights and engine are installed; an Ollama server answers
    on its base URL; an API model's key variable is set (litellm knows each provider's variable)."""
    if alias.embedded:
        from operators.llm.embedded import gguf_path, llama_cpp_installed
        from operators.models.references import ModelNotFoundError

        try:
            path = gguf_path(alias.model.split("/", 1)[1])
        except ModelNotFoundError as err:
            return False, err.message
        if not llama_cpp_installed():
            return False, "llama-cpp-python is not installed (make demo installs it)"
        return True, f"weights installed: {path.name}"
    if alias.provider in ("ollama", "ollama_chat"):
        import requests

        base = ollama_base(alias)
        try:
            requests.get(f"{base}/api/tags", timeout=timeout).raise_for_status()
        except requests.RequestException as err:
            return False, f"no Ollama server answers on {base} ({type(err).__name__}); set OLLAMA_API_BASE"
        return True, f"Ollama answers on {base}"
    if alias.api_key_env:
        if os.environ.get(alias.api_key_env):
            return True, f"${alias.api_key_env} is set"
        return False, f"${alias.api_key_env} is not set"
    import litellm

    found = litellm.validate_environment(model=alias.model)
    if found.get("keys_in_environment"):
        return True, "its key variables are set" if found.get("missing_keys") == [] else "no key needed"
    return False, f"set {', '.join(found.get('missing_keys') or ['its API key'])}"
